"""Loopback bytes per training step: DDP vs ZeRO-1 vs FSDP2 (fully_shard each block, then root),
2 ranks, gloo, float32. Run: torchrun --standalone --nproc_per_node=2 p_wire_fsdp.py"""
import json, torch, torch.distributed as dist
from torch import nn
torch.set_num_threads(1)
from mtlib import distributed as du
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT

env = du.setup()
data = exp.dataset()
batch = exp.global_batch(data, 0)[env.rank * 8:(env.rank + 1) * 8]
out = {}
def measure(name, model, opt, steps=4):
    for _ in range(2):  # warm-up: connections, bucket rebuild, lazy init
        loss = exp.loss_fn(model, batch); opt.zero_grad(); loss.backward(); opt.step()
    dist.barrier(); before = exp.loopback_tx_bytes(); dist.barrier()
    for _ in range(steps):
        loss = exp.loss_fn(model, batch); opt.zero_grad(); loss.backward(); opt.step()
    dist.barrier(); after = exp.loopback_tx_bytes()
    out[name] = (after - before) / steps  # both ranks together (+ a few barrier bytes)
du.seed_all(0)
m = GPT(exp.model_config()); P = sum(p.numel() for p in m.parameters())
ddp = nn.parallel.DistributedDataParallel(m)
measure("ddp", ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-3))
from torch.distributed.optim import ZeroRedundancyOptimizer
du.seed_all(0); m = GPT(exp.model_config()); ddp = nn.parallel.DistributedDataParallel(m)
measure("zero1", ddp, ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3))
from torch.distributed.fsdp import fully_shard
du.seed_all(0); m = GPT(exp.model_config())
root_only = sum(p.numel() for n, p in m.named_parameters() if not n.startswith("h."))
for b in m.h: fully_shard(b)
fully_shard(m)
measure("fsdp2", m, torch.optim.AdamW(m.parameters(), lr=1e-3))
# barrier-only baseline
dist.barrier(); before = exp.loopback_tx_bytes()
for _ in range(4): dist.barrier()
dist.barrier(); out["barriers_only_per_4"] = (exp.loopback_tx_bytes() - before) / 4
if env.rank == 0:
    ring = 2 * (2 - 1) / 2 * 4 * P
    print(json.dumps({"P": P, "root_only_params": root_only, "ring_bytes_per_worker": ring,
                      **{k: v for k, v in out.items()},
                      **{f"{k}/ddp": out[k] / out["ddp"] for k in ("zero1", "fsdp2")}}, indent=1))
du.teardown()
