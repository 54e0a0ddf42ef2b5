"""Loopback bytes of gloo's collectives on P float32 numbers, 2 ranks: all_reduce,
all_gather_into_tensor, reduce_scatter_tensor (what FSDP2 uses)."""
import torch, torch.distributed as dist
from mtlib import distributed as du
from mtlib.experiments import ddp as exp
env = du.setup(); P = 62784; reps = 20
x = torch.ones(P); half = torch.ones(P // 2)
ops = {"all_reduce": lambda: dist.all_reduce(x),
       "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(x, half),
       "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(half, x)}
res = {}
for name, op in ops.items():
    op(); dist.barrier(); b = exp.loopback_tx_bytes()
    for _ in range(reps): op()
    dist.barrier(); res[name] = (exp.loopback_tx_bytes() - b) / reps / (2 * 4 * P / 2)  # / ring all-gather volume
if env.rank == 0:
    print({k: round(v, 2) for k, v in res.items()}, "(units: bytes / (N (N-1)/N P x 4), so a bandwidth-optimal all-gather or reduce-scatter is 1, an all-reduce 2)")
du.teardown()
