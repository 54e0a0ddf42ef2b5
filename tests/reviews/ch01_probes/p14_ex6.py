# Exercise 6: the model without attention with 5x the budget (seed 0), native kernels.
import time, torch
from defs import *
t = time.process_time()
m = build("without attention", 0); train(m, steps=5 * STEPS)
r = [eval_batch(m, L)[3] for L in LENGTHS]
print("5x budget, no attention: tokens " + " ".join(f"{c.float().mean():.2f}" for c in r) + "; sequences " + " ".join(f"{c.all(1).float().mean():.2f}" for c in r))
print(f"cpu {time.process_time() - t:.0f}s")
