# 7.2: SwiGLU memory. Longer training (exercise 5), and is it the gate or the SiLU?
from common import *
t0 = time.process_time()
N_FACTS, N_CLASSES, d = 1536, 16, 16
class Custom(nn.Module):  # non-gated SiLU FFN, or a gated FFN with another gate activation
    def __init__(self, kind, h):
        super().__init__()
        self.kind = kind
        self.w1 = nn.Linear(d, h, bias=False); self.w2 = nn.Linear(h, d, bias=False)
        if kind.endswith("glu"): self.w3 = nn.Linear(d, h, bias=False)
    def forward(self, x):
        a = self.w1(x)
        if self.kind == "silu": hdn = F.silu(a)
        elif self.kind == "reglu": hdn = F.relu(a) * self.w3(x)
        elif self.kind == "bilinear_glu": hdn = a * self.w3(x)
        return self.w2(hdn)
def build(act):
    if act in ("relu", "gelu", "swiglu"):
        return FeedForward(d, {"relu": 96, "gelu": 96, "swiglu": 64}[act], activation=act, bias=False)
    return Custom(act, 96 if act == "silu" else 64)
def memorise(act, seed, steps=200, lr=1e-2):
    g = torch.Generator().manual_seed(seed)
    keys = torch.randn(N_FACTS, d, generator=g); labels = torch.randint(N_CLASSES, (N_FACTS,), generator=g)
    torch.manual_seed(seed)
    model = nn.Sequential(build(act), nn.Linear(d, N_CLASSES))
    assert sum(p.numel() for p in model[0].parameters()) == 3072
    h = train.fit(model, lambda m, b: F.cross_entropy(m(b[0]), b[1]), lambda s: (keys, labels), steps=steps, lr=lr, seed=seed)
    with torch.no_grad():
        return (model(keys).argmax(-1) == labels).float().mean().item(), h.loss[-1]
for act in ("relu", "gelu", "silu", "swiglu", "reglu", "bilinear_glu"):
    r200 = memorise(act, 0)
    print(f"{act:>13} (seed 0): 200 steps {r200[0]:.3f}", end="")
    if act in ("relu", "gelu", "swiglu"):
        for steps in (1000, 3000):
            a, l = memorise(act, 0, steps=steps)
            print(f" | {steps} steps {a:.3f} (loss {l:.3f})", end="")
    print()
print("cpu s", time.process_time() - t0)
