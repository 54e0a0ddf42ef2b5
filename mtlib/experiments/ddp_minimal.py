"""The smallest complete DDP training script (chapter 13), with PyTorch's own data pipeline.

Run it with ``torchrun --standalone --nproc_per_node=2 -m mtlib.experiments.ddp_minimal``.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from mtlib.experiments.ddp import GLOBAL_BATCH, LR, dataset, loss_fn, model_config
from mtlib.models.gpt import GPT


def main(epochs: int = 2, steps_per_epoch: int = 10) -> None:
    """Train chapter 13's GPT with DDP; rank 0 prints the last loss of every epoch."""
    dist.init_process_group("gloo")  # torchrun set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    torch.manual_seed(0)  # the same seed on every rank
    model = DistributedDataParallel(GPT(model_config()))  # broadcasts rank 0's weights
    data = TensorDataset(dataset())  # (4096, 33) token ids
    sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(data, seed=0)
    # the sampler gives this rank its shard of each epoch's permutation (shuffle=True)
    per_rank = GLOBAL_BATCH // dist.get_world_size()
    loader = DataLoader(data, batch_size=per_rank, sampler=sampler, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new permutation each epoch, the same on every rank
        for _, (batch,) in zip(range(steps_per_epoch), loader, strict=False):
            loss = loss_fn(model, batch)  # this rank's mean loss over its (B / N, T + 1) shard
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces (averages) the gradients during backward
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
