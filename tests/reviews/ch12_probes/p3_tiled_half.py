# Probe: tiled_attention in half precision (it does not upcast, unlike the explicit path),
# the causal alignment against PyTorch's is_causal, and peak_memory_mib when fn frees old tensors.
import sys, torch
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
import torch.nn.functional as F
from mtlib import bench
from mtlib.attention import scaled_dot_product_attention as sdpa, tiled_attention
g = torch.Generator().manual_seed(0)
for n, spread in ((1024, 1.0), (4096, 1.0), (1024, 4.0)):
    q, k, v = (torch.randn(1, 2, n, 64, generator=g, dtype=torch.float64) for _ in range(3))
    q = q * spread
    ref = torch.softmax(q @ k.transpose(-2, -1) / 8, -1) @ v
    for dt in (torch.float16, torch.bfloat16):
        qh, kh, vh = (t.to(dt) for t in (q, k, v))
        errs = {
            "mtlib explicit": sdpa(qh, kh, vh),
            "tiled (block 128)": tiled_attention(qh, kh, vh, block_size=128),
            "F.sdpa default": F.scaled_dot_product_attention(qh, kh, vh),
        }
        line = ", ".join(f"{name} {(out.double() - ref).abs().max().item():.1e}" for name, out in errs.items())
        print(f"N={n}, |q| x{spread}, {str(dt)[6:]}: max |err| vs float64: {line}", flush=True)
# causal with Tq < Tk: mtlib (queries = last positions) vs PyTorch (queries = first positions)
q, k, v = torch.randn(1, 1, 5, 8), torch.randn(1, 1, 9, 8), torch.randn(1, 1, 9, 8)
a = tiled_attention(q, k, v, causal=True, block_size=4)
b = F.scaled_dot_product_attention(q, k, v, is_causal=True)
c = sdpa(q, k, v, is_causal=True)
print("Tq=5 < Tk=9 causal: mtlib tiled == mtlib explicit:", torch.allclose(a, c, atol=1e-6),
      "| mtlib == F.sdpa(is_causal=True):", torch.allclose(a, b, atol=1e-6))
# peak_memory_mib when fn first frees a tensor allocated before it (e.g. zero_grad(set_to_none=True))
holder = {"old": torch.empty(64 * 2**20 // 4)}  # 64 MiB allocated before the call
def frees_then_allocates():
    holder["old"] = None  # frees 64 MiB
    x = torch.empty(100 * 2**20 // 4)  # 100 MiB held at once inside fn
    return x.sum()
print(f"fn holds 100 MiB at once after freeing 64 MiB allocated earlier: peak_memory_mib = "
      f"{bench.peak_memory_mib(frees_then_allocates):.1f} MiB")
