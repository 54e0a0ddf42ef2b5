"""Equal-context comparison on a common set of targets (seed-0 text models)."""
import torch, time, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl, char_lm
from mtlib.models.transformer_xl import TransformerXL, TransformerXLConfig
t0 = time.process_time()
models, report = txl.load_checkpoint()
tok, tr, va = char_lm.splits()
rows = txl.streams(va, 16)[:, :1000]  # (16, 1000): the first third of each stream (CPU budget)
B, N = rows.shape
print("stream length", N)

@torch.no_grad()
def seg_losses(model):
    """per-target loss (B, N-1) reading fixed segments with memory carried (evaluate's protocol)"""
    T = model.config.seg_len; out = torch.full((B, N - 1), float('nan')); mems = None
    for s in range(0, N - 1, T):
        x, y = rows[:, s:s+T], rows[:, s+1:s+T+1]; x = x[:, :y.shape[1]]
        lg, mems = model(x, mems)
        out[:, s:s+y.shape[1]] = F.cross_entropy(lg.transpose(1, 2), y, reduction='none')
    return out

@torch.no_grad()
def slide_losses(model, window, stride):
    """window moved by stride; each target scored once, in the last `stride` positions"""
    out = torch.full((B, N - 1), float('nan'))
    for s in range(0, N - window, stride):
        lg, _ = model(rows[:, s:s+window])
        l = F.cross_entropy(lg.transpose(1, 2), rows[:, s+1:s+window+1], reduction='none')
        if s == 0: out[:, :window] = l
        else: out[:, s+window-stride:s+window] = l[:, -stride:]
    return out

def clone(key, **kw):
    m = TransformerXL(TransformerXLConfig(**{**report["configs"][key], **kw})).eval()
    m.load_state_dict(models[key].state_dict()); return m

van, xl = models["text/vanilla"], models["text/xl"]
L = {}
L["vanilla fixed"] = seg_losses(van)
for st in (16, 4, 1):
    L[f"vanilla slide32/{st}"] = slide_losses(van, 32, st)
L["xl memory32"] = seg_losses(xl)
L["xl weights slide32/1 (no mem)"] = slide_losses(clone("text/xl", mem_len=0), 32, 1)
L["xl weights win64/32 (recompute)"] = slide_losses(clone("text/xl", seg_len=64, mem_len=0), 64, 32)
L["vanilla weights slide64/4 (dist>31 unseen)"] = slide_losses(clone("text/vanilla", seg_len=64), 64, 4)
common = torch.ones(B, N - 1, dtype=torch.bool); common[:, :64] = False
for v in L.values(): common &= ~v.isnan()
print("common targets", int(common.sum()), "of", B * (N - 1))
for k, v in L.items():
    print(f"{k:45s} common {v[common].mean():.4f}   all-own {v[~v.isnan()].mean():.4f}")
# paired bootstrap over streams x blocks for the two key gaps
def gap(a, b):
    d = (L[a] - L[b])[common]
    return d.mean().item(), d.std().item() / d.numel() ** .5
for a, b in [("vanilla slide32/1", "xl memory32"), ("vanilla slide32/16", "xl memory32"),
             ("xl weights slide32/1 (no mem)", "xl memory32"), ("vanilla slide32/1", "xl weights slide32/1 (no mem)"),
             ("xl weights win64/32 (recompute)", "xl memory32")]:
    m, se = gap(a, b); print(f"gap {a} - {b}: {m:+.4f} (naive s.e. {se:.4f})")
# recompute vs memory: max per-token difference
d = (L["xl weights win64/32 (recompute)"] - L["xl memory32"])[common].abs()
print("recompute vs memory: max |per-token diff|", d.max().item(), "mean", d.mean().item())
print("cpu s", time.process_time() - t0)
