"""Chapter 13's exercises: a rank's shard of the dataset, all-reduce (mean), ring all-reduce bytes."""


def shard_indices(n, rank, world_size, drop_last):
    order = list(range(n))
    if drop_last:
        order = order[: n - n % world_size]
    else:
        padding = -n % world_size  # repeat the start until every rank gets as many
        order += (order * (padding // n + 1))[:padding]
    return order[rank::world_size]


def allreduce_mean(grads):
    return grads.mean(dim=0, keepdim=True).expand_as(grads).clone()  # every row: the mean


def ring_allreduce_bytes(model, world_size, bytes_per_number):
    numbers = sum(p.numel() for p in model.parameters() if p.requires_grad)  # tied: once
    return 2 * (world_size - 1) / world_size * numbers * bytes_per_number
