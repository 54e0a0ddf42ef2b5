# Probe: how much the book's pinned numerics (MKL_CBWR=COMPATIBLE, ATEN_CPU_CAPABILITY=avx2) slow
# the kernels that the chapter times. Run once natively and once under the pin.
import os, time, torch
torch.set_num_threads(1)
def best(fn, r=9):
    ts = []
    for _ in range(r):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return min(ts)
q, k = torch.randn(2, 2048, 64); out = torch.empty(2048, 2048)
a, b = torch.randn(2, 512, 512); o2 = torch.empty(512, 512)
s = torch.randn(2048, 2048); o3 = torch.empty_like(s)
print(f"{os.environ.get('MKL_CBWR', 'native'):>10}: qk^T (2048x64 @ 64x2048) {1e3*best(lambda: torch.matmul(q, k.T, out=out)):6.2f} ms; "
      f"512^3 matmul {1e3*best(lambda: torch.matmul(a, b, out=o2)):6.2f} ms; softmax 2048^2 {1e3*best(lambda: torch.softmax(s, -1, out=o3) if False else torch.softmax(s, -1)):6.2f} ms")
