"""Probe: the hardened check_mlm_masking over 20 draws of a correct answer and the [MASK]-as-random one."""
import torch
from mtlib.exercises import CheckFailed
from mtlib.exercises import ch09
from tests.solutions.ch09 import mlm_masking
from tests.test_exercises_ch09 import masking

torch.set_num_threads(1)
fails, worst = 0, []
for seed in range(20):
    def fn(ids, *, generator, **kw):
        g = torch.Generator().manual_seed(1000 + seed)  # a different correct draw, still deterministic
        return mlm_masking(ids, generator=g, **kw)
    try:
        ch09.check_mlm_masking(fn)
    except CheckFailed as e:
        fails += 1
        print(seed, e)
    ids, kw, _ = ch09._masking_layout(2, specials_first=False)
    kw["generator"] = torch.Generator().manual_seed(1000 + seed)
    for name, f in (("correct", mlm_masking), ("mask_as_random", lambda i, **k: masking(i, mask_as_random=True, **k))):
        kw["generator"] = torch.Generator().manual_seed(1000 + seed)
        inp, lab = f(ids, **kw)
        ch = lab != -100
        worst.append((name, ((inp == kw["mask_id"]) & ch).sum().item() / ch.sum().item()))
print("correct answers failing:", fails, "of 20")
for name in ("correct", "mask_as_random"):
    v = [s for n, s in worst if n == name]
    print(name, "[MASK] share in the 2-id layout: min %.4f max %.4f (threshold 0.8167)" % (min(v), max(v)))
