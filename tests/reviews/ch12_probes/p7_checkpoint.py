# Probe: cell 35's memory ratio: what it contains, and what CUDA's semantics (max_allocated - before,
# which nets out the grads that zero_grad(set_to_none=True) frees) would give; tiled rel. error in half.
import sys, json, torch
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
from functools import partial
from torch import nn
from torch.utils.checkpoint import checkpoint
from mtlib import bench
from mtlib.blocks import BlockConfig, EncoderBlock
torch.manual_seed(0)
cfg = BlockConfig(d_model=128, num_heads=4, d_ff=512, dropout=0.0, norm_first=True)
stack = nn.ModuleList(EncoderBlock(cfg) for _ in range(6))
x = torch.randn(8, 256, 128)
def train_step(use_checkpoint, keep_grads=True):
    stack.zero_grad(set_to_none=True)
    h = x
    for block in stack:
        h = checkpoint(block, h, use_reentrant=False) if use_checkpoint else block(h)
    h.pow(2).mean().backward()
    return [p.grad.clone() for p in stack.parameters()] if keep_grads else None
params_mib = sum(p.numel() for p in stack.parameters()) * 4 / 2**20
train_step(False)
mem = {c: bench.peak_memory_mib(partial(train_step, c), "cpu") for c in (False, True)}
print(f"parameters: {params_mib:.2f} MiB (grads the same, clones the same)")
print(f"cell 35 as written: peak without {mem[False]:.1f} MiB, with {mem[True]:.1f} MiB, ratio {mem[True]/mem[False]:.2f}")
act = {c: bench.peak_memory_mib(partial(train_step, c, False), "cpu") for c in (False, True)}
print(f"without the returned clones: without {act[False]:.1f}, with {act[True]:.1f}, ratio {act[True]/act[False]:.2f}")
cuda_like = {c: mem[c] - params_mib for c in mem}
print(f"CUDA semantics (old grads freed inside fn are netted out): ratio {cuda_like[True]/cuda_like[False]:.2f}")
# half-precision tiled error with the reference computed from the rounded inputs
import torch.nn.functional as F
from mtlib.attention import scaled_dot_product_attention as sdpa, tiled_attention
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, 2048, 64, generator=g) for _ in range(3))
for dt in (torch.float16, torch.bfloat16):
    qh, kh, vh = (t.to(dt) for t in (q, k, v))
    ref = torch.softmax(qh.double() @ kh.double().transpose(-2, -1) / 8, -1) @ vh.double()
    e = {n: (o.double() - ref).abs().max().item() for n, o in
         (("explicit", sdpa(qh, kh, vh)), ("tiled", tiled_attention(qh, kh, vh)), ("F.sdpa", F.scaled_dot_product_attention(qh, kh, vh)))}
    print(f"N=2048 {dt}: error vs float64 on the rounded inputs: " + ", ".join(f"{n} {v:.1e}" for n, v in e.items()))
