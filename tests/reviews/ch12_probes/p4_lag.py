# Probe: the lag task. Steps to solve, per-position and whole-sequence accuracy, sharpness of
# the look-up, learning rate, and a 2-layer window-8 model.
import time, torch, numpy as np
import torch.nn.functional as F
from torch import nn
from nbcode import ns
V, T, LAG, D = ns['V'], ns['T'], ns['LAG'], ns['D']
LagModel, lag_batch, linear_attention = ns['LagModel'], ns['lag_batch'], ns['linear_attention']
t0 = time.time()
xe, ye = lag_batch(512, torch.Generator().manual_seed(1000))

def evaluate(model):
    with torch.no_grad():
        right = (model(xe).argmax(-1)[:, LAG:] == ye[:, LAG:]).float()  # (512, 36)
    return right.mean().item(), right.all(dim=1).float().mean().item(), right.mean(0)

def train(seed, steps, every, lr=3e-3, make=lambda: LagModel()):
    torch.manual_seed(seed); gen = torch.Generator().manual_seed(seed)
    model = make(); opt = torch.optim.Adam(model.parameters(), lr=lr); curve = {}
    for step in range(1, steps + 1):
        x, y = lag_batch(32, gen)
        loss = F.cross_entropy(model(x)[:, LAG:].reshape(-1, V), y[:, LAG:].reshape(-1))
        opt.zero_grad(); loss.backward(); opt.step()
        if step % every == 0:
            curve[step] = evaluate(model)
    return model, curve

def first_above(curve, bar=0.95):
    return next((s for s, (a, _, _) in curve.items() if a > bar), None)

print("== steps to per-token accuracy > 0.95 (evaluated every 20 steps), lr 3e-3 ==")
models = {}
for name, kw in (("exact", {}), ("linear", {"linear": True})):
    hits, at = [], {}
    for seed in range(3):
        model, curve = train(seed, 240, 20, make=lambda: LagModel(**kw))
        models[(name, seed)] = (model, curve)
        hits.append(first_above(curve))
        at.setdefault(60, []).append(curve[60][0]); at.setdefault(120, []).append(curve[120][0])
        at.setdefault(240, []).append(curve[240][0])
    print(f"{name:>7}: first step > 0.95: {hits}; acc@60 {np.round(at[60],2)}, @120 {np.round(at[120],2)}, @240 {np.round(at[240],2)}", flush=True)
    for seed in range(3):
        c = models[(name, seed)][1]
        print(f"   seed {seed}: per-token " + " ".join(f"{s}:{c[s][0]:.2f}" for s in c) )
        print(f"   seed {seed}: whole-seq " + " ".join(f"{s}:{c[s][1]:.2f}" for s in c) )
print(f"[{time.time()-t0:.0f}s]", flush=True)

print("== per-position accuracy at 120 steps (exact) / 120 and 240 steps (linear), seed 0 ==")
for name in ("exact", "linear"):
    c = models[(name, 0)][1]
    for s in (120, 240):
        pp = c[s][2]
        print(f"{name} @{s}: positions 12-23 {pp[:12].mean():.2f}, 24-35 {pp[12:24].mean():.2f}, 36-47 {pp[24:].mean():.2f}; worst position {pp.min():.2f}")

print("== how sharp is the look-up? weight on key t-12 (best head), mean over 512 sequences, t >= 12 ==")
def weights_exact(model, x):
    h = model.tok(x) + model.pos.weight
    _, w = model.attn(h, mask=model.allowed, need_weights=True, average_attn_weights=False)  # (B, 2, T, T)
    return w
def weights_linear(model, x):
    h = model.tok(x) + model.pos.weight
    q, k = (proj(h).view(len(x), T, 2, D // 2).transpose(1, 2) for proj in (model.attn.q_proj, model.attn.k_proj))
    q, k = F.elu(q) + 1, F.elu(k) + 1
    s = (q @ k.transpose(-2, -1)).tril()
    return s / s.sum(-1, keepdim=True)
idx = torch.arange(LAG, T)
for name, fn in (("exact", weights_exact), ("linear", weights_linear)):
    for seed in range(3):
        model = models[(name, seed)][0]
        with torch.no_grad():
            w = fn(model, xe)  # (B, 2, T, T)
        on_target = w[:, :, idx, idx - LAG]  # (B, 2, 36)
        best = on_target.mean(dim=(0, 2)).max().item()
        late = on_target[:, :, -12:].mean(dim=(0, 2)).max().item()
        print(f"{name} seed {seed} (240 steps): weight on key t-12, best head: {best:.2f} (positions 36-47: {late:.2f})")
print(f"[{time.time()-t0:.0f}s]", flush=True)

print("== learning rate: accuracy at 120 steps, 3 seeds ==")
for lr in (1e-3, 1e-2):
    for name, kw in (("exact", {}), ("linear", {"linear": True})):
        accs = [train(seed, 120, 120, lr=lr, make=lambda: LagModel(**kw))[1][120][0] for seed in range(3)]
        print(f"lr {lr:g} {name}: {np.round(accs, 2)}", flush=True)
print(f"[{time.time()-t0:.0f}s]", flush=True)
