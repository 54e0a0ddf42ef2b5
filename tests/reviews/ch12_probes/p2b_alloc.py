# Probe: is the superlinear time at N = 4096 cache misses or fresh-page first touch (allocation)?
import os, time, torch
torch.set_num_threads(1)
def best(fn, r=5):
    ts = []
    for _ in range(r):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return min(ts)
print("MKL_CBWR =", os.environ.get("MKL_CBWR", "(unset)"))
d = 64
with torch.inference_mode():
    for n in (1024, 2048, 4096):
        q, k = torch.randn(2, 1, 1, n, d)
        s = q @ k.transpose(-2, -1)
        out = torch.empty_like(s)
        mm_out = torch.empty_like(s)
        t_new = best(lambda: torch.exp(s))
        t_out = best(lambda: torch.exp(s, out=out))
        m_new = best(lambda: torch.matmul(q, k.transpose(-2, -1)))
        m_out = best(lambda: torch.matmul(q, k.transpose(-2, -1), out=mm_out))
        per = 1e9 / n**2
        print(f"N={n}: exp fresh {t_new*per:6.2f} ns/elem, exp into a reused buffer {t_out*per:6.2f} ns/elem;"
              f" qk^T fresh {m_new*per:6.2f} ns/elem, into reused {m_out*per:6.2f} ns/elem", flush=True)
