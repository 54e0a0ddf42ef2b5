# Probe: cells 12 and 14 (uncommitted outputs), plus what the worst draws do.
import time, torch, torch.nn.functional as F
from defs import *
t0 = time.process_time()
gen = torch.Generator().manual_seed(0)
n_train, n_query = 60, 80
x_train = torch.sort(torch.rand(n_train, generator=gen) * 5).values
y_train = truth(x_train) + 0.5 * torch.randn(n_train, generator=gen)
x_query = torch.linspace(0, 5, n_query)
bandwidths = [0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0]
def mse(xq, xt, yt, s): return F.mse_loss(nadaraya_watson(xq, xt, yt, s)[0], truth(xq)).item()
learned = learn_bandwidth(x_train, y_train)
fine = torch.logspace(-2, 0.7, 200)
with torch.no_grad():
    loo = torch.stack([leave_one_out_loss(s.log(), x_train, y_train) for s in fine])
grid_sigma = fine[loo.argmin()].item()
print(f"cell 12: learned {learned:.4f}, LOO grid min {grid_sigma:.4f}, ratio-1 {learned/grid_sigma-1:+.4f}; fine-grid spacing ratio {(fine[1]/fine[0]).item():.4f}")
# LOO-loss shape: local minima?
d = loo[1:-1]; mins = ((d < loo[:-2]) & (d < loo[2:])).nonzero().flatten() + 1
print("local minima of LOO loss on fine grid at sigma:", [round(fine[i].item(), 3) for i in mins])
# Oracle: the sigma minimising MSE vs truth on the fine grid
def oracle(xt, yt):
    m = torch.tensor([mse(x_query, xt, yt, s.item()) for s in fine]); return fine[m.argmin()].item(), m.min().item()
print("cell 12 oracle (fine grid, vs truth):", oracle(x_train, y_train))
rows = []
for draw in range(20):
    g = torch.Generator().manual_seed(draw)
    x_d = torch.sort(torch.rand(n_train, generator=g) * 5).values
    y_d = truth(x_d) + 0.5 * torch.randn(n_train, generator=g)
    s_d = learn_bandwidth(x_d, y_d)
    grid_best = min(mse(x_query, x_d, y_d, s) for s in bandwidths)
    with torch.no_grad():
        loo_d = torch.stack([leave_one_out_loss(s.log(), x_d, y_d) for s in fine])
    s_loo = fine[loo_d.argmin()].item()
    s_or, m_or = oracle(x_d, y_d)
    # fresh test data: new x points from the same distribution, compare to truth there (generalisation)
    rows.append((draw, s_d, s_loo, s_or, mse(x_query, x_d, y_d, s_d) / grid_best, mse(x_query, x_d, y_d, s_d) / m_or))
ratios = torch.tensor([r[4] for r in rows]); ratios_or = torch.tensor([r[5] for r in rows])
print(f"cell 14: learned/grid-best median {ratios.median():.2f} worst {ratios.max():.2f}; within 10%: {(ratios<1.1).sum().item()}, >1.5x: {(ratios>1.5).sum().item()}, below 1 (beats grid): {(ratios<1).sum().item()}")
print(f"         learned/fine-oracle median {ratios_or.median():.2f} worst {ratios_or.max():.2f}")
print("draw  learned  LOO-min  oracle  /grid  /oracle")
for r in sorted(rows, key=lambda r: -r[4])[:6]:
    print("%4d  %6.3f  %6.3f  %6.3f  %5.2f  %5.2f" % r)
print("learned vs LOO-min max rel diff:", max(abs(r[1]/r[2]-1) for r in rows))
print("worst draws: learned < oracle (chasing noise)?", [(r[0], r[1] < r[3]) for r in sorted(rows, key=lambda r: -r[4])[:5]])
print("cpu s", time.process_time() - t0)
