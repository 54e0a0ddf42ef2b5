# 7.3: is the vanishing gradient of the plain stack a property of depth, or of PyTorch's default init?
from common import *
t0 = time.process_time()
class FFNStack(nn.Module):
    def __init__(self, depth, residual, norm, width=32, init="default"):
        super().__init__()
        self.residual = residual
        self.ffs = nn.ModuleList(FeedForward(width, 4 * width) for _ in range(depth))
        self.norms = nn.ModuleList(nn.LayerNorm(width) if norm else nn.Identity() for _ in range(depth))
        self.head = nn.Linear(width, 10)
        if init == "he":  # He for the layer before the ReLU, LeCun (variance 1/fan_in) after it
            for ff in self.ffs:
                nn.init.kaiming_normal_(ff.linear1.weight, nonlinearity="relu"); nn.init.zeros_(ff.linear1.bias)
                nn.init.normal_(ff.linear2.weight, std=(1 / ff.linear2.in_features) ** 0.5 * 2 ** 0.5 / 2 ** 0.5); nn.init.zeros_(ff.linear2.bias)
    def forward(self, x):
        for ff, norm in zip(self.ffs, self.norms):
            x = x + ff(norm(x)) if self.residual else ff(norm(x))
        return self.head(x)

def g(depth, residual, norm, seed, init):
    torch.manual_seed(seed)
    m = FFNStack(depth, residual, norm, init=init)
    x, y = torch.randn(8, 10, 32), torch.randint(10, (8, 10))
    F.cross_entropy(m(x).flatten(0, 1), y.flatten()).backward()
    return m.ffs[0].linear1.weight.grad.norm().item()
for init in ("default", "he"):
    for name, (r, n) in {"plain": (False, False), "residual": (True, False)}.items():
        vals = [sum(g(L, r, n, s, init) for s in range(3)) / 3 for L in (2, 4, 8, 16, 32)]
        print(f"{init:>7} init, {name:>8}: " + "  ".join(f"L={L}: {v:.1e}" for L, v in zip((2, 4, 8, 16, 32), vals)))
# 7.6 companion: no-residual tagger at depth 1 and 2 (is the failure a depth effect?)
for depth in (1, 2, 3):
    print(f"no residuals, depth {depth}, lr 2e-2 warm-up:", [round(final_loss(run(True, LR, WARMUP, s, block=NoResidualBlock, depth=depth)), 2) for s in range(2)])
print("cpu s", time.process_time() - t0)
