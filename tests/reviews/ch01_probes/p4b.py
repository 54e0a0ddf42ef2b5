import torch, math
torch.set_num_threads(1)
from mtlib import exercises
def no_keepdim(x, temperature=1.0):
    z = x / temperature; z = z - z.max(dim=-1).values
    return z.exp() / z.exp().sum(-1, keepdim=True)
def pow_after(x, temperature=1.0):
    p = torch.softmax(x, -1) ** (1 / temperature); return p / p.sum(-1, keepdim=True)
for f, c in [(no_keepdim, exercises.check_softmax),
             (lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1) @ v, exercises.check_soft_lookup)]:
    try: c(f)
    except Exception as e: print(e, "\n")
x = torch.tensor([0.9, 0.5, 0.1, 0.84])
print("softmax(x)^(1/tau) at the chapter's tau=0.001:", pow_after(x, 0.001), " reference", torch.softmax(x / 0.001, -1))
print("at tau=0.01:", pow_after(x, 0.01))
