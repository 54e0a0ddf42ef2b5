# 7.6 "Break it": does the no-residual 6-block tagger learn at a smaller LR or with more steps? And the matched control.
from common import *
t0 = time.process_time()
print("matched control, Pre-LN WITH residuals AND warm-up (lr 2e-2):", [round(final_loss(run(True, LR, WARMUP, s)), 2) for s in range(3)])
for lr in (1e-3, 3e-3, 1e-2):
    print(f"no residuals, warm-up 20, lr {lr:g}, 60 steps:", [round(final_loss(run(True, lr, WARMUP, s, block=NoResidualBlock)), 2) for s in range(2)])
for lr in (3e-3, 1e-2):
    ms = []
    h = run(True, lr, WARMUP, 0, block=NoResidualBlock, steps=300, model_out=ms)
    tok, seq, _ = accuracy(ms[0])
    print(f"no residuals, warm-up 20, lr {lr:g}, 300 steps, seed 0: final {final_loss(h):.2f} token acc {tok:.3f} seq acc {seq:.3f}")
ms = []
h = run(True, 3e-3, WARMUP, 0, steps=300, model_out=ms); tok, seq, _ = accuracy(ms[0])
print(f"WITH residuals, lr 3e-3, 300 steps, seed 0: final {final_loss(h):.2f} token {tok:.3f} seq {seq:.3f}")
print("cpu s", time.process_time() - t0)
