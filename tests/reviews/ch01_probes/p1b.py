import torch
from defs import *
fine = torch.logspace(-2, 0.7, 200)
for draw in range(20):
    g = torch.Generator().manual_seed(draw)
    x_d = torch.sort(torch.rand(60, generator=g) * 5).values
    y_d = truth(x_d) + 0.5 * torch.randn(60, generator=g)
    s_d = learn_bandwidth(x_d, y_d)
    with torch.no_grad():
        loo = torch.stack([leave_one_out_loss(s.log(), x_d, y_d) for s in fine])
    dd = loo[1:-1]; mins = ((dd < loo[:-2]) & (dd < loo[2:])).nonzero().flatten() + 1
    if abs(s_d / fine[loo.argmin()].item() - 1) > 0.05:
        s_long = learn_bandwidth(x_d, y_d, steps=3000)
        print(draw, "learned", round(s_d,3), "3000 steps", round(s_long,3), "LOO argmin", round(fine[loo.argmin()].item(),3), "local minima", [round(fine[i].item(),3) for i in mins],
              "loo at learned", leave_one_out_loss(torch.tensor(s_d).log(), x_d, y_d).item(), "min", loo.min().item())
