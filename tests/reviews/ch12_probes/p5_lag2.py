# Probe: steps to 0.95 at lr 1e-2; window 8 at 480 steps; two layers of window 8 on lag 12.
import time, torch, numpy as np
import torch.nn.functional as F
from torch import nn
from nbcode import ns
from mtlib.attention import MultiHeadAttention
V, T, LAG, D = ns['V'], ns['T'], ns['LAG'], ns['D']
LagModel, lag_batch = ns['LagModel'], ns['lag_batch']
t0 = time.time()
xe, ye = lag_batch(512, torch.Generator().manual_seed(1000))
def evaluate(model):
    with torch.no_grad():
        right = (model(xe).argmax(-1)[:, LAG:] == ye[:, LAG:]).float()
    return right.mean().item(), right.all(dim=1).float().mean().item()
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
    return next((s for s, (a, _) in curve.items() if a > bar), None)

for name, kw in (("exact", {}), ("linear", {"linear": True})):
    runs = [train(s, 120, 10, lr=1e-2, make=lambda: LagModel(**kw))[1] for s in range(3)]
    print(f"lr 1e-2 {name}: first step > 0.95 {[first_above(c) for c in runs]}; whole-seq @120 "
          f"{[round(c[120][1], 2) for c in runs]}", flush=True)
print(f"[{time.time()-t0:.0f}s]")
_, c = train(0, 480, 480, make=lambda: LagModel(window=8))
print(f"window 8, one layer, 480 steps: {c[480][0]:.2f}", flush=True)

class TwoLayerWindow(nn.Module):
    """Two masked attention layers with residuals (no MLP): reach 2 * (w - 1) steps back."""
    def __init__(self, window):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.attn1, self.attn2 = MultiHeadAttention(D, 2), MultiHeadAttention(D, 2)
        self.head = nn.Linear(D, V)
        i = torch.arange(T)
        allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
        self.register_buffer("allowed", allowed, persistent=False)
    def forward(self, x):
        h = self.tok(x) + self.pos.weight
        h = h + self.attn1(h, mask=self.allowed)[0]
        h = h + self.attn2(h, mask=self.allowed)[0]
        return self.head(h)
for w in (8, 4):
    accs = []
    for s in range(3):
        _, c = train(s, 480, 120, make=lambda: TwoLayerWindow(w))
        accs.append([round(c[k][0], 2) for k in c])
    print(f"two layers of window {w} (reach {2*(w-1)}), acc @120/240/360/480 steps: {accs}", flush=True)
print(f"[{time.time()-t0:.0f}s]")
