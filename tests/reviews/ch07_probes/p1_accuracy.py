# Per-token and exact-sequence accuracy of the cell-33 models (held-out 2000 sequences).
from common import *
t0 = time.process_time()
COND = {"Post-LN, no warm-up": (False, 0), "Post-LN, warm-up": (False, WARMUP), "Pre-LN, no warm-up": (True, 0)}
for name, (nf, wu) in COND.items():
    for seed in range(3):
        ms = []
        h = run(nf, LR, wu, seed, model_out=ms)
        tok, seq, per_pos = accuracy(ms[0])
        print(f"{name:>20} seed {seed}: final_loss {final_loss(h):.2f} last-step loss {h.loss[-1]:.2f} "
              f"token acc {tok:.3f} seq acc {seq:.3f} per-position {utils.rounded(per_pos, 2)}")
print("cpu s", time.process_time() - t0)
