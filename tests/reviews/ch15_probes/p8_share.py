"""Where the fixed-segment gap sits; the absolute model with a longer memory at evaluation."""
import torch, time, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl, char_lm
from mtlib.models.transformer_xl import TransformerXL, TransformerXLConfig
t0 = time.process_time()
models, report = txl.load_checkpoint()
tok, tr, va = char_lm.splits()
@torch.no_grad()
def curve(model):
    rows = txl.streams(va, 16); T, mems, tot, n = model.config.seg_len, None, 0.0, 0
    for s in range(0, rows.shape[1] - T - 1, T):
        lg, mems = model(rows[:, s:s+T], mems)
        tot = tot + F.cross_entropy(lg.transpose(1, 2), rows[:, s+1:s+T+1], reduction="none").mean(0); n += 1
    return tot / n
v, x = curve(models["text/vanilla"]), curve(models["text/xl"])
g = v - x
print("total gap (mean over positions)", round(g.mean().item(), 4))
for a, b in [(0, 1), (0, 4), (0, 8), (8, 32), (16, 32)]:
    print(f"share of the gap from positions {a}-{b-1}: {g[a:b].sum().item() / g.sum().item():.2f}")
for mem in (32, 64):
    m = TransformerXL(TransformerXLConfig(**{**report["configs"]["text/xl_absolute"], "mem_len": mem})).eval()
    m.load_state_dict(models["text/xl_absolute"].state_dict())
    print(f"XL absolute (trained memory 32), memory {mem} at evaluation: {txl.score(m, 'text'):.3f} nats/char")
print("cpu s", round(time.process_time() - t0, 1))
