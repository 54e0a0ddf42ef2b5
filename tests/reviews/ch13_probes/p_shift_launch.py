"""Cell 11's comparison under the seed sweep's mechanism (MTLIB_SEED_SHIFT=1000), 3 steps."""
import os, torch
from mtlib import utils
from mtlib.experiments import ddp as exp
utils.setup(seed=0)
report = exp.launch("ddp", steps=3, short_steps=3, dtype="float64", timeout_s=110)
ref = exp.reference_losses(3, dtype=torch.float64)
ddp = report["runs"]["ddp"]["loss"]
print("MTLIB_SEED_SHIFT =", os.environ.get("MTLIB_SEED_SHIFT"))
print("one process:", [round(x, 4) for x in ref]); print("two processes:", [round(x, 4) for x in ddp])
print("max gap over 3 steps: %.3g (cell 11 asserts < 1e-11 over 25 steps)" % max(abs(a - b) for a, b in zip(ref, ddp)))
