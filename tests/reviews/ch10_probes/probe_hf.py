import torch, warnings
torch.set_num_threads(1)
warnings.filterwarnings("ignore")
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper, TemperatureLogitsWarper
from mtlib.models import GPT
from mtlib.models.gpt import top_k_filter, top_p_filter
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=61, n_positions=23, n_embd=42, n_layer=2, n_head=3, n_inner=74, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
hf = GPT2LMHeadModel(cfg).eval()
ours = GPT.from_hf(hf).eval()
x = torch.randint(0, 61, (2, 17))
with torch.no_grad():
    d = (hf(x).logits - ours(x)).abs().max().item()
print("fp32 logits max diff", f"{d:.1e}")
# half precision
for dt in (torch.bfloat16, torch.float16):
    try:
        hf_h = GPT2LMHeadModel(cfg).eval(); hf_h.load_state_dict(hf.state_dict()); hf_h = hf_h.to(dt)
        o = GPT.from_hf(hf_h)
        with torch.no_grad():
            a, b = hf_h(x).logits.float(), o(x).float()
            ref = hf(x).logits
        print(dt, "ours dtype", next(o.parameters()).dtype, "| ours vs hf(same dtype)", f"{(a-b).abs().max().item():.2e}", "| ours vs fp32", f"{(b-ref).abs().max().item():.2e}", "hf vs fp32", f"{(a-ref).abs().max().item():.2e}")
    except Exception as e:
        print(dt, "ERROR", type(e).__name__, str(e)[:200])
# GPT2Model (no lm_head)
try:
    body = GPT2Model(cfg).eval(); body.load_state_dict(hf.transformer.state_dict())
    o2 = GPT.from_hf(body)
    with torch.no_grad():
        print("GPT2Model -> logits diff", f"{(o2(x) - ours(x)).abs().max().item():.1e}")
except Exception as e:
    print("GPT2Model ERROR", type(e).__name__, str(e)[:200])
# dropout fields: HF has 3 dropouts, ours takes resid_pdrop only
cfg2 = GPT2Config(vocab_size=61, n_positions=23, n_embd=42, n_layer=2, n_head=3, resid_pdrop=0.0, embd_pdrop=0.1, attn_pdrop=0.3)
hf2 = GPT2LMHeadModel(cfg2)
o3 = GPT.from_hf(hf2)
print("attn_pdrop 0.3, embd_pdrop 0.1, resid 0 -> ours dropout:", o3.config.dropout, "training mode copied:", o3.training, hf2.training)
# reorder_and_upcast_attn / scale_attn_by_inverse_layer_idx
for kw in (dict(scale_attn_by_inverse_layer_idx=True), dict(reorder_and_upcast_attn=True)):
    try:
        h3 = GPT2LMHeadModel(GPT2Config(vocab_size=61, n_positions=23, n_embd=42, n_layer=2, n_head=3, **kw)).eval()
        o4 = GPT.from_hf(h3).eval()
        with torch.no_grad():
            print(kw, "accepted; diff", f"{(h3(x).logits - o4(x)).abs().max().item():.1e}")
    except Exception as e:
        print(kw, "refused:", str(e)[:120])
# greedy generate vs HF
with torch.no_grad():
    g_hf = hf.generate(x[:, :5], max_new_tokens=15, do_sample=False, pad_token_id=0)
    g_ours = ours.generate(x[:, :5], 15)
print("greedy generate equal:", torch.equal(g_hf, g_ours))
# sampling filters vs HF warpers: random logits with ties and -inf
g = torch.Generator().manual_seed(1)
worst = {}
for trial in range(300):
    z = torch.randn(4, 50, generator=g) * 3
    if trial % 3 == 0: z = (z * 2).round() / 2  # ties
    if trial % 5 == 0: z[:, :10] = float("-inf")
    k = int(torch.randint(1, 60, (1,), generator=g)); p = float(torch.rand(1, generator=g)) * 0.99 + 0.01
    tk_hf = TopKLogitsWarper(top_k=k)(None, z.clone()); tk = top_k_filter(z, k)
    tp_hf = TopPLogitsWarper(top_p=p)(None, z.clone()); tp = top_p_filter(z, p)
    worst["top_k mismatched rows"] = worst.get("top_k mismatched rows", 0) + int(((tk_hf.isfinite()) != (tk.isfinite())).any(-1).sum())
    worst["top_p mismatched rows"] = worst.get("top_p mismatched rows", 0) + int(((tp_hf.isfinite()) != (tp.isfinite())).any(-1).sum())
print("over 1200 rows (ties, -inf):", worst)
# all -inf row / top_p on filtered logits
z = torch.full((1, 5), float("-inf"))
print("top_p_filter of an all -inf row:", top_p_filter(z, 0.9))
# half-precision top_p_filter
z = torch.randn(2, 50257) * 2
a = top_p_filter(z, 0.9).isfinite().sum(-1); b = top_p_filter(z.half(), 0.9).isfinite().sum(-1); c = top_p_filter(z.bfloat16(), 0.9).isfinite().sum(-1)
print("top_p 0.9 kept on V=50257: fp32", a.tolist(), "fp16", b.tolist(), "bf16", c.tolist())
