# Probe: does a torch.cat cache cost more than a constant factor over the in-place one?
# One attention layer, d_model 512 (8 heads), decoding 2048 steps; time of the late steps.
import sys, time, torch, numpy as np
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
from mtlib.attention import KVCache, MultiHeadAttention
class CatCache(KVCache):
    def update(self, k, v):
        if self.k is not None:
            k = torch.cat([self.k, k], dim=2); v = torch.cat([self.v, v], dim=2)
        self.k, self.v = k, v
        return k, v
torch.manual_seed(0)
mha = MultiHeadAttention(512, 8).eval()
steps = 2048
xs = torch.randn(steps, 1, 1, 512)
caches = {"in place (KVCache)": KVCache(), "torch.cat": CatCache()}
times = {n: [] for n in caches}
with torch.inference_mode():
    for t in range(steps):
        for name, cache in caches.items():  # lockstep
            s = time.perf_counter(); mha(xs[t], cache=cache); times[name].append(time.perf_counter() - s)
for name, ts in times.items():
    ts = np.array(ts)
    print(f"{name:>20}: median step at t<256 {1e6*np.median(ts[:256]):6.0f} us, at t in 1792..2047 {1e6*np.median(ts[-256:]):6.0f} us")
