# Probe: "the peak is two N x N float32 matrices" and "tiled's extra memory is linear in N",
# under the settings the book uses elsewhere: masks, half precision, training (autograd).
import sys, torch
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
import torch.nn.functional as F
from mtlib import bench
from mtlib.attention import scaled_dot_product_attention as sdpa, tiled_attention
from mtlib.masks import causal_mask
B, H, n, d = 2, 2, 1024, 64
unit = B * H * n * n * 4 / 2**20  # one (B, H, N, N) float32 matrix, MiB
print(f"unit: one (B={B}, H={H}, N={n}, N) float32 matrix = {unit:.1f} MiB")
g = torch.Generator().manual_seed(0)
base = torch.randn(3, B, H, n, d, generator=g)
pad = torch.ones(B, 1, 1, n, dtype=torch.bool); pad[1, ..., n - 100:] = False
allowed = causal_mask(n, n)

def run(name, fn):
    mib = bench.peak_memory_mib(fn, "cpu")
    print(f"{name:<58} peak {mib:7.1f} MiB = {mib / unit:5.2f} N x N float32 matrices", flush=True)

with torch.inference_mode():
    q, k, v = base
    run("mtlib explicit, no mask (the chapter's case)", lambda: sdpa(q, k, v))
    run("mtlib explicit, is_causal=True", lambda: sdpa(q, k, v, is_causal=True))
    run("mtlib explicit, mask=(T, T) causal bool", lambda: sdpa(q, k, v, mask=allowed))
    run("mtlib explicit, padding mask (B, 1, 1, T)", lambda: sdpa(q, k, v, mask=pad))
    run("mtlib explicit, bias=(T,T) float", lambda: sdpa(q, k, v, bias=torch.zeros(n, n)))
    for dt in (torch.float16, torch.bfloat16):
        qh, kh, vh = (t.to(dt) for t in base)
        run(f"mtlib explicit, {dt} inputs", lambda: sdpa(qh, kh, vh))
        run(f"F.sdpa (default backend), {dt}", lambda: F.scaled_dot_product_attention(qh, kh, vh))
    run("tiled_attention block 128, inference", lambda: tiled_attention(q, k, v, block_size=128))
    run("tiled_attention causal block 128, inference", lambda: tiled_attention(q, k, v, causal=True, block_size=128))

def train(fn):
    def step():
        q, k, v = (t.clone().requires_grad_() for t in base)
        fn(q, k, v).sum().backward()
    return step

def fwd_graph(fn):
    keep = []
    def step():
        q, k, v = (t.clone().requires_grad_() for t in base)
        keep.append(fn(q, k, v))  # output and its graph held, as in a training forward
        keep.clear()
    return step

run("mtlib explicit, forward+backward", train(lambda q, k, v: sdpa(q, k, v)))
run("tiled_attention block 128, forward+backward", train(lambda q, k, v: tiled_attention(q, k, v, block_size=128)))
run("F.sdpa default (CPU flash), forward+backward", train(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)))
