import torch
torch.set_num_threads(1)
from mtlib.models import attention_rollout
g = torch.Generator().manual_seed(0)
att = [(torch.randn(2, 12, 197, 197, generator=g)*3).softmax(-1) for _ in range(12)]
r32 = attention_rollout(att)
for dt in (torch.bfloat16, torch.float16):
    r = attention_rollout([a.to(dt) for a in att]).float()
    rel = ((r - r32).abs().max() / r32.abs().max()).item()
    print(dt, f"max abs err {(r-r32).abs().max():.2e}, relative to max entry {rel:.2%}; row sums {r.sum(-1).min():.3f}..{r.sum(-1).max():.3f}; top-1 of class row agrees: {(r[:,0,1:].argmax(-1)==r32[:,0,1:].argmax(-1)).tolist()}")
