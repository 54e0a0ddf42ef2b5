"""Full validation text: vanilla with a window slid one character (32 of context for every target) vs the XL memory."""
import torch, time, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl, char_lm
t0 = time.process_time()
models, report = txl.load_checkpoint()
tok, tr, va = char_lm.splits()
rows = txl.streams(va, 16); B, N = rows.shape
@torch.no_grad()
def slide(model, window, stride):
    out = torch.full((B, N - 1), float('nan'))
    for s in range(0, N - window, stride):
        lg, _ = model(rows[:, s:s+window])
        l = F.cross_entropy(lg.transpose(1, 2), rows[:, s+1:s+window+1], reduction='none')
        if s == 0: out[:, :window] = l
        else: out[:, s+window-stride:s+window] = l[:, -stride:]
    return out
@torch.no_grad()
def seg(model):
    T = model.config.seg_len; out = torch.full((B, N - 1), float('nan')); mems = None
    for s in range(0, N - 1, T):
        x, y = rows[:, s:s+T], rows[:, s+1:s+T+1]; x = x[:, :y.shape[1]]
        lg, mems = model(x, mems); out[:, s:s+y.shape[1]] = F.cross_entropy(lg.transpose(1, 2), y, reduction='none')
    return out
L = {"vanilla slide32/16": slide(models["text/vanilla"], 32, 16), "vanilla slide32/1": slide(models["text/vanilla"], 32, 1), "xl memory32": seg(models["text/xl"]), "vanilla fixed": seg(models["text/vanilla"])}
common = torch.ones(B, N - 1, dtype=torch.bool); common[:, :64] = False
for v in L.values(): common &= ~v.isnan()
print("common targets", int(common.sum()))
for k, v in L.items(): print(f"{k:22s} {v[common].mean():.4f}")
# gap with a block bootstrap over (stream, 256-char block)
d = (L["vanilla slide32/1"] - L["xl memory32"]); d16 = (L["vanilla slide32/16"] - L["xl memory32"])
blocks = [(b, s) for b in range(B) for s in range(64, N - 1 - 256, 256)]
g = torch.Generator().manual_seed(0)
def boot(dd):
    per = torch.tensor([dd[b, s:s+256][common[b, s:s+256]].mean().item() for b, s in blocks])
    means = per[torch.randint(0, len(per), (2000, len(per)), generator=g)].mean(1)
    return per.mean().item(), means.quantile(0.025).item(), means.quantile(0.975).item()
print("gap stride 1  - memory: mean %.4f, 95%% block-bootstrap [%.4f, %.4f]" % boot(d))
print("gap stride 16 - memory: mean %.4f, 95%% block-bootstrap [%.4f, %.4f]" % boot(d16))
print("cpu s", round(time.process_time() - t0, 1))
