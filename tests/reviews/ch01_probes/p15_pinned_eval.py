# The pinned (notebook-identical) seed-0 attention model: neighbours of the mirror, per-position, lengths > 20.
import torch
from defs import *
m = build("with attention"); m.load_state_dict(torch.load("ckpt/with_attention_0_pinned.pt")); m.eval()
b = sequence_task(500, 16, 16, kind="reverse", generator=torch.Generator().manual_seed(321))
_, w = m.greedy(b.src, b.lengths, 16, 1)
st, mi = torch.arange(16), torch.arange(15, -1, -1)
on = w[:, st, mi].mean().item()
nb = (w[:, st[:-1], mi[:-1] - 1].sum() + w[:, st[1:], mi[1:] + 1].sum()).item() / (500 * 16)
print(f"pinned: mirror {on:.3f}, its two neighbours {nb:.3f}, elsewhere {1 - on - nb:.3f}")
_, _, _, c = eval_batch(m, 20); pos = c.float().mean(0)
print("pinned per-step accuracy at 20: first 3", [round(x, 2) for x in pos[:3].tolist()], "middle 6-15", round(pos[5:15].mean().item(), 2), "last 3", [round(x, 2) for x in pos[-3:].tolist()])
for L in (22, 25, 30, 40):
    _, _, _, c = eval_batch(m, L, n=300, seed=777); print(f"pinned L={L}: tokens {c.float().mean():.2f}, sequences {c.all(1).float().mean():.2f}")
