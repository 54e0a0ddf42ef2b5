import torch, warnings, time
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
t0=time.process_time()
import transformers
from transformers import ViTConfig as HFC, ViTForImageClassification, ViTModel
from mtlib.models import ViT, attention_rollout
print("transformers", transformers.__version__)
cfg = HFC(image_size=12, patch_size=3, num_channels=2, hidden_size=40, num_hidden_layers=2, num_attention_heads=5,
          intermediate_size=56, num_labels=7, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
torch.manual_seed(0)
for impl in ("eager", "sdpa"):
    hf = ViTForImageClassification(HFC(**cfg.to_dict(), attn_implementation=impl) if False else cfg).eval()
    hf.config._attn_implementation = impl
    ours = ViT.from_hf(hf).eval()
    x = torch.randn(3, 2, 12, 12)
    with torch.no_grad():
        ref = hf(pixel_values=x, output_attentions=(impl=="eager"))
        out = ours(x)
    print(impl, "fp32 logits max diff", f"{(ref.logits-out).abs().max():.1e}")
for dt in (torch.bfloat16, torch.float16):
    hf16 = ViTForImageClassification(cfg).eval()
    ours32 = ViT.from_hf(hf16).eval()
    hf16 = hf16.to(dt); ours16 = ViT.from_hf(hf16).eval()
    with torch.no_grad():
        x = torch.randn(3, 2, 12, 12)
        r32 = ours32(x); r16 = ours16(x.to(dt)).float(); h16 = hf16(pixel_values=x.to(dt)).logits.float()
    print(dt, f"ours16 vs ours32 {(r16-r32).abs().max():.1e}; hf16 vs ours32 {(h16-r32).abs().max():.1e}; ours16 vs hf16 {(r16-h16).abs().max():.1e}; dtype out {ours16(x.to(dt)).dtype}")
    with torch.no_grad():
        _, att = ours16.forward_features(x.to(dt), return_attentions=True)
    print("  attentions dtype", att[0].dtype, "rollout dtype", attention_rollout(att).dtype)
# HF attention weights parity + rollout on HF outputs
hf = ViTForImageClassification(cfg).eval(); hf.config._attn_implementation = "eager"
ours = ViT.from_hf(hf).eval()
x = torch.randn(3, 2, 12, 12)
with torch.no_grad():
    ha = hf(pixel_values=x, output_attentions=True).attentions
    _, oa = ours.forward_features(x, return_attentions=True)
print("attention weights max diff", f"{max((a-b).abs().max().item() for a,b in zip(ha,oa)):.1e}", "; rollout accepts HF tuple:", tuple(attention_rollout(ha).shape))
# ViTModel with pooler: mtlib returns class token, not pooler_output
hm = ViTModel(cfg).eval(); om = ViT.from_hf(hm).eval()
with torch.no_grad():
    ho = hm(pixel_values=x); oo = om(x)
print("ViTModel: ours(x) shape", tuple(oo.shape), "== last_hidden_state[:,0]?", torch.allclose(oo, ho.last_hidden_state[:,0], atol=1e-5), "; == pooler_output?", torch.allclose(oo, ho.pooler_output, atol=1e-5))
# wrong image size: HF interpolate_pos_encoding vs ours
try: ours(torch.randn(1,2,15,15))
except Exception as e: print("other resolution:", type(e).__name__, str(e)[:140])
print("cpu", round(time.process_time()-t0,1))
