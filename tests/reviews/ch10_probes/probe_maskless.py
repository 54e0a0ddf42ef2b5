import torch, math, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import char_lm
model, maskless, report = char_lm.load_checkpoint()
tok, tr, va = char_lm.splits()
fwm = char_lm.forward_without_mask
# (a) the causality test of 10.1 applied to the maskless forward (untrained model suffices)
from mtlib.models import GPT
torch.manual_seed(1)
g = GPT(char_lm.model_config(103)).eval()
idx = torch.randint(0, 103, (3, 11)); ch = idx.clone(); ch[:, 6:] = (ch[:, 6:] + 1) % 103
with torch.no_grad():
    past = (fwm(g, ch)[:, :6] - fwm(g, idx)[:, :6]).abs().max().item()
print(f"(a) causality test on forward_without_mask, untrained: change at positions 0-5 = {past:.2e} (the test would fail: caught before training)")
# (b) last-position loss as a function of the window length
@torch.no_grad()
def last_loss(m, L, causal):
    starts = torch.arange(0, len(va) - L - 1, L)
    tot, n = 0.0, 0
    for ch in starts.split(256):
        x, y = char_lm.windows(va, ch, L)
        lg = m(x) if causal else fwm(m, x)
        l = F.cross_entropy(lg[:, -1], y[:, -1], reduction="none")
        tot += l.sum().item(); n += len(l)
    return tot / n, n
for L in (8, 16, 32, 48, 64):
    a, n = last_loss(maskless, L, False); b, _ = last_loss(model, L, True)
    print(f"(b) window {L:>2} ({n} windows): maskless last-position {a:.2f}, causal last-position {b:.2f}")
# (c) greedy generation with the maskless forward itself (last position), vs generate() (causal)
prompt = "The return statement"
ids = tok.encode(prompt)[None]
with torch.no_grad():
    x = ids
    for _ in range(100):
        nxt = fwm(maskless, x[:, -64:])[:, -1].argmax(-1, keepdim=True); x = torch.cat([x, nxt], 1)
print("(c) maskless forward, greedy:", repr(tok.decode(x[0])))
print("    generate() (runs causal):", repr(tok.decode(maskless.generate(ids, 100, use_cache=False)[0])))
# (d) fair comparison: causal model's validation at step 800 (report) vs maskless
for s in range(3):
    ev = {e["step"]: e["val"] for e in report["runs"][f"causal/{s}"]["evals"]}
    r = report["runs"][f"maskless/{s}"]
    print(f"(d) seed {s}: causal val (all positions) at step 800 {ev[800]:.3f}, at 2000 {ev[2000]:.3f}; causal val_last (2000 steps) {report['runs'][f'causal/{s}']['val_last']:.3f}; maskless val_last {r['val_last']:.3f}, val_masked {r['val_masked']:.2f}, val_last_masked {r['val_last_masked']:.2f}")
