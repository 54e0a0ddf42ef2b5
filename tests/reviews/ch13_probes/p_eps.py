"""Is the float32 drift of 'whole batch vs mean of its halves' Adam's division by sqrt(v)?
Same seed-2 setup as cell 14 (120 steps), AdamW with eps 1e-8 (the default) and a large eps."""
import torch
torch.set_num_threads(1)
from mtlib import distributed as du, train
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT
data = exp.dataset()
def run(halves, eps, steps=120, seed=2):
    du.seed_all(seed)
    model = GPT(exp.model_config())
    opt = torch.optim.AdamW(model.parameters(), lr=exp.LR, betas=(0.9, 0.98), weight_decay=0.0, eps=eps)
    lf = (lambda m, b: (exp.loss_fn(m, b[:8]) + exp.loss_fn(m, b[8:])) / 2) if halves else exp.loss_fn
    return train.fit(model, lf, lambda s: exp.global_batch(data, s, seed=seed), steps=steps, optimizer=opt, seed=seed).loss
for eps in (1e-8, 1e-5, 1e-3):
    a, b = run(False, eps), run(True, eps)
    gap = max(abs(x - y) for x, y in zip(a, b))
    print(f"AdamW eps={eps:g}: whole vs halves, 120 steps: max gap {gap:.2g}; loss {a[0]:.3f} -> {a[-1]:.3f}", flush=True)
