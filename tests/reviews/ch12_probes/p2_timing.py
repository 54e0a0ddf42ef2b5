# Probe: where the explicit-attention time goes, and how the pinned MKL mode changes it.
import os, sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
from mtlib.attention import scaled_dot_product_attention
import torch.nn.functional as F
def best(fn, r=3):
    ts = []
    for _ in range(r):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return min(ts)
print("MKL_CBWR =", os.environ.get("MKL_CBWR", "(unset)"), "ATEN =", os.environ.get("ATEN_CPU_CAPABILITY", "(unset)"))
d = 64
with torch.inference_mode():
    for n in (256, 512, 1024, 2048, 4096):
        q, k, v = torch.randn(3, 1, 1, n, d)
        s = q @ k.transpose(-2, -1)
        fns = {
            "qk^T": lambda: q @ k.transpose(-2, -1),
            "softmax": lambda: s.softmax(-1),
            "pv": lambda: s @ v,
            "mtlib explicit": lambda: scaled_dot_product_attention(q, k, v),
            "F.sdpa default": lambda: F.scaled_dot_product_attention(q, k, v),
        }
        row = {name: best(f, 3 if n <= 2048 else 2) for name, f in fns.items()}
        print(n, "  ".join(f"{name} {1e3*t:8.2f} ms" for name, t in row.items()), flush=True)
