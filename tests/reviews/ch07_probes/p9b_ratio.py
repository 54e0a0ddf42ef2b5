# Cell 30: last/first block gradient at init, per seed, 20 seeds (cheap: one forward/backward each).
from common import *
def block_grad_norms(depth, norm_first, seed):
    torch.manual_seed(seed)
    model = Tagger(depth, norm_first)
    tagging_loss(model, reverse_batches(seed=100 + seed)(0)).backward()
    return torch.tensor([torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item() for b in model.blocks])
for depth in (6, 24):
    for nf in (False, True):
        r = torch.tensor([(lambda g: (g[-1] / g[0]).item())(block_grad_norms(depth, nf, s)) for s in range(20)])
        print(f"{'Pre' if nf else 'Post'}-LN {depth} blocks, last/first over seeds 0-19: median {r.median():.2f}, "
              f"range {r.min():.2f}-{r.max():.2f}, share > 1: {(r > 1).float().mean():.2f}; seeds 0-2: {utils.rounded(r[:3].tolist(), 2)}")
