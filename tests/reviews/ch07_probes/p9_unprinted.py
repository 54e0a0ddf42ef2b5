# Prose numbers not printed by any cell: cell 15 (seed 1, four rates) and cell 30 (last/first block ratio, other seeds).
import p5_lib as P
from common import *
t0 = time.process_time()
for act in ("relu", "gelu", "swiglu"):
    print(f"seed 1 {act:>6}: " + "  ".join(f"lr {lr:g}: {P.memorise(act, 1, lr=lr)[0]:.3f}" for lr in (3e-3, 1e-2, 3e-2, 1e-1)))
def block_grad_norms(depth, norm_first, seed):
    torch.manual_seed(seed)
    model = Tagger(depth, norm_first)
    tagging_loss(model, reverse_batches(seed=100 + seed)(0)).backward()
    return torch.tensor([torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item() for b in model.blocks])
for s in range(3, 9):
    g = block_grad_norms(24, False, s)
    print(f"Post-LN 24 blocks seed {s}: last/first block gradient {g[-1] / g[0]:.2f}")
print("cpu s", time.process_time() - t0)
