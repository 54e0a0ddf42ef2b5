# Cell 40's unprinted seed-0 claims: 12-block Post-LN with 40 warm-up steps, and at peak lr 1e-2 and 5e-3 with/without warm-up.
from common import *
print("12 blocks Post-LN, lr 2e-2, warm-up 40:", round(final_loss(run(False, LR, 40, 0, depth=12)), 2))
for lr in (1e-2, 5e-3):
    print(f"12 blocks Post-LN, lr {lr:g}: no warm-up {final_loss(run(False, lr, 0, 0, depth=12)):.2f}, warm-up 20 {final_loss(run(False, lr, WARMUP, 0, depth=12)):.2f}")
