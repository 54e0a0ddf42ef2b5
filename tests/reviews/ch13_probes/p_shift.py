"""Under the seed sweep (MTLIB_SEED_SHIFT), does the kernel's reference see the same seeds as the
torchrun workers? The worker never calls utils.setup, so the shift is never installed there."""
import os, sys, torch
torch.set_num_threads(1)
from mtlib import distributed as du, utils
from mtlib.models.gpt import GPT
from mtlib.experiments import ddp as exp
role = sys.argv[1]
if role == "kernel":
    utils.setup(seed=0)  # the chapter's setup cell: installs the shift
order = du.shard_indices(4096, 0, 1, shuffle=True, seed=0) if role == "kernel" else \
    list(torch.utils.data.DistributedSampler(range(4096), num_replicas=1, rank=0, shuffle=True, seed=0))
du.seed_all(0)
w = GPT(exp.model_config()).h[0].attn.q_proj.weight if hasattr(GPT(exp.model_config()).h[0], "attn") else next(GPT(exp.model_config()).parameters())
du.seed_all(0)
w = next(GPT(exp.model_config()).parameters())
print(role, "MTLIB_SEED_SHIFT=", os.environ.get("MTLIB_SEED_SHIFT"), "first 5 indices", order[:5], "first weight sum %.6f" % w.sum().item())
