# Cell 40's unprinted numbers (seeds 1, 2 at 12 blocks) and exercise 4's "a few seconds each" (12 blocks, 200 steps).
from common import *
for s in (1, 2):
    print(f"12 blocks seed {s}: Post-LN warm-up {final_loss(run(False, LR, WARMUP, s, depth=12)):.2f}, "
          f"Pre-LN no warm-up {final_loss(run(True, LR, 0, s, depth=12)):.2f}")
for nf, w in ((False, 20), (False, 60), (True, 0), (True, 20)):
    t = time.perf_counter(); c = time.process_time()
    ms = []
    h = run(nf, 2e-2, w, 0, depth=12, steps=200, model_out=ms)
    tok, seq, _ = accuracy(ms[0])
    print(f"12 blocks, 200 steps, {'Pre' if nf else 'Post'}-LN warm-up {w}: final {final_loss(h):.2f} token {tok:.3f} seq {seq:.3f} "
          f"({time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s cpu)")
