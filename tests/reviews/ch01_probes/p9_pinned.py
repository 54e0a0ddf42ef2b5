# Retrain "with attention" seed 0 under the chapter's pinned numerics and compare with the native run.
import sys, torch
from defs import *
m = build("with attention", 0); train(m, seed=0)
torch.save(m.state_dict(), "ckpt/with_attention_0_pinned.pt")
for L in (16, 20):
    _, _, _, c = eval_batch(m, L); print(f"pinned: length {L}: tokens {c.float().mean():.3f}, sequences {c.all(1).float().mean():.3f}")
native = build("with attention"); native.load_state_dict(torch.load("ckpt/with_attention_0.pt"))
for L in (16, 20):
    _, _, _, c = eval_batch(native, L); print(f"native: length {L}: tokens {c.float().mean():.3f}, sequences {c.all(1).float().mean():.3f}")
diff = max((a - b).abs().max().item() for a, b in zip(m.state_dict().values(), native.state_dict().values()))
print("max weight difference pinned vs native after 600 steps:", f"{diff:.3g}")
