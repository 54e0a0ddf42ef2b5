# Independent control for 6.6.1's story ("the second layer's unseen inputs"): retrain T5 with ONE layer.
import time, torch
torch.set_num_threads(1)
t0 = time.process_time()
from mtlib.experiments import extrapolation as ex
from mtlib.experiments.extrapolation_table import RESULTS
c = ex.ExtrapolationConfig(shift=1, num_layers=1)
for seed in range(5):
    m = ex.train("t5", seed, c)
    ev = ex.evaluate(m, c); w = ex.evaluate(m, c, window=32)["unseen"]
    tab = RESULTS["shift=1"]["t5"][str(seed)]
    print(f"T5 1 layer, s=1 seed {seed}: L=32 {ev['L=32']:.3f} unseen {ev['unseen']:.3f} window {w:.3f}   "
          f"(2 layers, table: unseen {tab['unseen']:.3f} window {tab['window']:.3f})")
print(f"cpu seconds: {time.process_time() - t0:.1f}")
