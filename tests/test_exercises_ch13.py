"""Chapter 13's self-checks: correct answers pass, the typical wrong ones are named."""

import re

import pytest
import torch

from mtlib import exercises

# ---- shard indices --------------------------------------------------------------------------


def good_shards(n, rank, world_size, drop_last):
    order = list(range(n))
    if drop_last:
        order = order[: n - n % world_size]
    else:
        order += (order * world_size)[: -n % world_size]  # repeat the start as often as needed
    return order[rank::world_size]


def good_shards_arithmetic(n, rank, world_size, drop_last):  # a correct variant: no list slicing
    per_rank = n // world_size if drop_last else -(-n // world_size)
    return [(rank + i * world_size) % n for i in range(per_rank)]


def good_shards_sampler(n, rank, world_size, drop_last):  # a correct variant: PyTorch's own
    sampler = torch.utils.data.DistributedSampler(
        range(n), num_replicas=world_size, rank=rank, shuffle=False, drop_last=drop_last
    )
    return list(sampler)


def contiguous_blocks(n, rank, world_size, drop_last):
    order = list(range(n))
    if drop_last:
        order = order[: n - n % world_size]
    else:
        order += order[: -n % world_size]
    share = len(order) // world_size
    return order[rank * share : (rank + 1) * share]


def unpadded(n, rank, world_size, drop_last):
    return list(range(n - n % world_size if drop_last else n))[rank::world_size]


def padded_with_last(n, rank, world_size, drop_last):
    order = list(range(n - n % world_size if drop_last else n))
    if not drop_last:
        order += [n - 1] * (-n % world_size)
    return order[rank::world_size]


def drop_last_ignored(n, rank, world_size, drop_last):
    return good_shards(n, rank, world_size, False)


def truncated(n, rank, world_size, drop_last):  # cut to n // world_size also without drop_last
    return list(range(n - n % world_size))[rank::world_size]


def test_shard_indices_correct_answers_pass(capsys):
    for fn in (good_shards, good_shards_arithmetic, good_shards_sampler):
        exercises.check_shard_indices(fn)
    assert capsys.readouterr().out.count("check_shard_indices: all 5 cases passed.") == 3


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (contiguous_blocks, "interleaved indices"),
        (unpadded, "the same number of samples"),
        (padded_with_last, "repeating the START"),
        (drop_last_ignored, "the tail is dropped"),
        (truncated, "without drop_last nothing is cut: pad"),
        (lambda n, r, w, d: truncated(n, r, w, d)[:1], "your shard is too short"),
        (lambda n, r, w, d: torch.arange(r, n, w).float(), "expected a list of ints"),
        (lambda n, r, w, d: list(range(n)), "expected [1, 5, 9], got"),
    ],
)
def test_shard_indices_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_shard_indices(wrong)


# ---- all-reduce (mean) ----------------------------------------------------------------------


def good_allreduce(grads):
    return grads.mean(dim=0, keepdim=True).expand_as(grads).clone()


def good_allreduce_loop(grads):  # a correct variant: sum rank by rank, divide, copy to each
    total = torch.zeros_like(grads[0])
    for g in grads:
        total = total + g
    return torch.stack([total / len(grads) for _ in grads])


def allreduce_sum(grads):
    return grads.sum(dim=0, keepdim=True).expand_as(grads).clone()


def reduce_to_rank0(grads):
    out = grads.clone()
    out[0] = grads.mean(dim=0)
    return out


def mean_wrong_dim(grads):
    return grads.mean(dim=-1, keepdim=True).expand_as(grads).clone()


def test_allreduce_mean_correct_answers_pass(capsys):
    exercises.check_allreduce_mean(good_allreduce)
    exercises.check_allreduce_mean(good_allreduce_loop)
    assert capsys.readouterr().out.count("check_allreduce_mean: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (allreduce_sum, "that is the sum"),
        (reduce_to_rank0, "only rank 0 has the mean"),
        (mean_wrong_dim, "dimension 0"),
        (lambda g: g.mean(dim=0), "expected output shape"),
    ],
)
def test_allreduce_mean_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_allreduce_mean(wrong)


# ---- ring all-reduce bytes ------------------------------------------------------------------


def good_bytes(model, world_size, bytes_per_number):
    numbers = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return 2 * (world_size - 1) / world_size * numbers * bytes_per_number


def good_bytes_by_chunks(model, world_size, bytes_per_number):  # a correct variant: step by step
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    chunk = sum(p.numel() for p in unique.values()) / world_size  # numbers per chunk
    steps = 2 * (world_size - 1)  # reduce-scatter, then all-gather
    return torch.tensor(steps * chunk * bytes_per_number)


def bytes_tied_twice(model, world_size, bytes_per_number):
    numbers = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    return 2 * (world_size - 1) / world_size * numbers * bytes_per_number


def bytes_with_frozen(model, world_size, bytes_per_number):
    numbers = sum(p.numel() for p in model.parameters())
    return 2 * (world_size - 1) / world_size * numbers * bytes_per_number


def bytes_without_two(model, world_size, bytes_per_number):
    return good_bytes(model, world_size, bytes_per_number) / 2


def bytes_without_fraction(model, world_size, bytes_per_number):
    numbers = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return 2 * numbers * bytes_per_number


def bytes_with_buffers(model, world_size, bytes_per_number):
    numbers = sum(p.numel() for p in model.parameters() if p.requires_grad)
    numbers += sum(b.numel() for b in model.buffers())  # BatchNorm's running statistics too
    return 2 * (world_size - 1) / world_size * numbers * bytes_per_number


def test_ring_bytes_correct_answers_pass(capsys):
    exercises.check_ring_allreduce_bytes(good_bytes)
    exercises.check_ring_allreduce_bytes(good_bytes_by_chunks)
    assert capsys.readouterr().out.count("check_ring_allreduce_bytes: all 5 cases passed.") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (bytes_tied_twice, "count it once"),
        (bytes_with_frozen, "frozen parameters"),
        (bytes_with_buffers, "running mean and variance) have no gradient"),
        (bytes_without_two, "a reduce-scatter AND an all-gather"),
        (bytes_without_fraction, "not 2"),
        (lambda m, w, b: "1024", "expected a number of bytes"),
        (lambda m, w, b: 2.0 * b, "expected 1698 bytes, got 8"),
    ],
)
def test_ring_bytes_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_ring_allreduce_bytes(wrong)
