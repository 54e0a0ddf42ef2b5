import torch, time, copy
torch.set_num_threads(1)
from mtlib.experiments import char_lm
from mtlib.models import GPT, GPTConfig
model, maskless, report = char_lm.load_checkpoint()
tok, tr, va = char_lm.splits()
# 1) the cached and uncached paths are not bit-identical: logits difference
prompt = tok.encode("A class ")[None]
with torch.no_grad():
    full = model(torch.cat([prompt, tok.encode("object attribute which items")[None]], 1))
    cache = model.new_cache(); model(prompt, cache=cache); steps = []
    for c in "object attribute which items":
        steps.append(model(tok.encode(c)[None], cache=cache)[:, -1])
    inc = torch.stack(steps, 1)
print("fp32: max |cached - full| logits", f"{(inc - full[:, 7:-1]).abs().max().item():.1e}")
# 2) many prompts, greedy, fp32 and bf16: do the cached tokens equal the uncached ones?
starts = torch.arange(64) * (len(va) // 64)
prompts = torch.stack([va[i:i + 8] for i in starts.tolist()])
for dt in (torch.float32, torch.bfloat16):
    m = copy.deepcopy(model).to(dt)
    a = m.generate(prompts, 56, use_cache=True); b = m.generate(prompts, 56, use_cache=False)
    diff_rows = (a != b).any(1)
    first = [int((a[r] != b[r]).nonzero()[0]) - 8 for r in diff_rows.nonzero().flatten().tolist()]
    print(f"{dt}: greedy, 64 prompts x 56 tokens: rows that differ with/without cache {int(diff_rows.sum())}/64; first differing new token index {first[:8]}")
# 3) sampled, bf16
m = copy.deepcopy(model).to(torch.bfloat16)
a = m.generate(prompts, 56, do_sample=True, use_cache=True, generator=torch.Generator().manual_seed(3))
b = m.generate(prompts, 56, do_sample=True, use_cache=False, generator=torch.Generator().manual_seed(3))
print("bf16 sampled: rows differing", int((a != b).any(1).sum()), "/64")
# 4) timing of one token after 511 on this (busy) machine, as cell 32, 11 repeats median
torch.manual_seed(0)
wide = GPT(GPTConfig(vocab_size=103, block_size=512, n_layer=4, d_model=128, num_heads=4, d_ff=512)).eval()
with torch.no_grad():
    seq = torch.randint(0, 103, (1, 512))
    for cached in (True, False):
        ts = []
        for _ in range(11):
            c = wide.new_cache(); wide(seq[:, :511], cache=c)
            t0 = time.perf_counter()
            wide(seq[:, 511:], cache=c) if cached else wide(seq)
            ts.append(time.perf_counter() - t0)
        print("cached" if cached else "uncached", f"median {1e3 * sorted(ts)[5]:.2f} ms, min {1e3 * min(ts):.2f} ms")
