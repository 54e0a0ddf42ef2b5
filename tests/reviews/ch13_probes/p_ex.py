import itertools, math, numpy as np, torch
torch.set_num_threads(1)
from torch import nn
from mtlib import exercises, distributed as du

def attempt(check, name, fn):
    try:
        check(fn); print(f"  ACCEPTED  {name}")
    except Exception as e:
        msg = str(e).replace("\n", " | ")
        print(f"  REJECTED  {name}: {msg[:330]}")

print("== shard_indices")
def pad_prefix(n, rank, w, drop_last):  # order[:padding]: wrong when padding > n (n < world)
    order = list(range(n))
    if drop_last: order = order[: n - n % w]
    else: order = order + order[: -n % w]
    return order[rank::w]
def cut_n_over_w(n, rank, w, drop_last):  # drop_last cut to n // w indices in total
    order = list(range(n))
    if drop_last: order = order[: n // w]
    else: order += order[: -n % w]
    return order[rank::w]
def pad_full_round(n, rank, w, drop_last):
    order = list(range(n))
    if drop_last: order = order[: n - n % w]
    else: order += order[: w - n % w]
    return order[rank::w]
def pad_end(n, rank, w, drop_last):
    order = list(range(n))
    if drop_last: order = order[: n - n % w]
    else: order += order[n - (-n % w):] if -n % w else []
    return order[rank::w]
def rank_off_by_one(n, rank, w, drop_last):
    return du.shard_indices(n, (rank + 1) % w, w, drop_last=drop_last)
def numpy_variant(n, rank, w, drop_last):  # correct, returns numpy ints
    total = (n // w) * w if drop_last else math.ceil(n / w) * w
    return list(np.resize(np.arange(n), total)[rank::w])
def sampler_variant(n, rank, w, drop_last):
    return list(torch.utils.data.DistributedSampler(range(n), num_replicas=w, rank=rank, shuffle=False, drop_last=drop_last))
def cycle_variant(n, rank, w, drop_last):
    total = (n // w) * w if drop_last else -(-n // w) * w
    return list(itertools.islice(itertools.cycle(range(n)), total))[rank::w]
def tensor_variant(n, rank, w, drop_last):
    total = (n // w) * w if drop_last else -(-n // w) * w
    return torch.arange(total) % n if False else (torch.arange(total) % n)[rank::w]
for f in (pad_prefix, cut_n_over_w, pad_full_round, pad_end, rank_off_by_one, numpy_variant, sampler_variant, cycle_variant, tensor_variant):
    attempt(exercises.check_shard_indices, f.__name__, f)
print("pad_prefix on n=3, world 5 (n < world):", [pad_prefix(3, r, 5, False) for r in range(5)], "vs", [du.shard_indices(3, r, 5) for r in range(5)])

print("== allreduce_mean")
attempt(exercises.check_allreduce_mean, "mean(0) without expand (shape (...))", lambda g: g.mean(0))
attempt(exercises.check_allreduce_mean, "mean(0, keepdim) not expanded (1, ...)", lambda g: g.mean(0, keepdim=True))
attempt(exercises.check_allreduce_mean, "sum / 2 hard-coded", lambda g: (g.sum(0, keepdim=True) / 2).expand_as(g))
attempt(exercises.check_allreduce_mean, "mean over dim 1", lambda g: g.mean(1, keepdim=True).expand_as(g))
attempt(exercises.check_allreduce_mean, "divide by numel of one gradient", lambda g: (g.sum(0, keepdim=True) / g[0].numel()).expand_as(g))
attempt(exercises.check_allreduce_mean, "correct, computed in float32", lambda g: g.float().mean(0, keepdim=True).expand_as(g))
attempt(exercises.check_allreduce_mean, "correct, loop over ranks", lambda g: torch.stack([sum(g) / len(g)] * len(g)))
attempt(exercises.check_allreduce_mean, "correct, repeat", lambda g: g.mean(0, keepdim=True).repeat(g.shape[0], *[1]*(g.dim()-1)))
attempt(exercises.check_allreduce_mean, "correct, in place", lambda g: g.copy_(g.mean(0, keepdim=True).expand_as(g)))
attempt(exercises.check_allreduce_mean, "list of rows", lambda g: [g.mean(0)] * g.shape[0])

print("== ring_allreduce_bytes")
def P(m): return sum(p.numel() for p in m.parameters() if p.requires_grad)
attempt(exercises.check_ring_allreduce_bytes, "state_dict numel", lambda m, N, b: 2*(N-1)/N*sum(t.numel() for t in m.state_dict().values())*b)
attempt(exercises.check_ring_allreduce_bytes, "element_size instead of bytes_per_number", lambda m, N, b: 2*(N-1)/N*sum(p.numel()*p.element_size() for p in m.parameters() if p.requires_grad))
attempt(exercises.check_ring_allreduce_bytes, "no / N", lambda m, N, b: 2*(N-1)*P(m)*b)
attempt(exercises.check_ring_allreduce_bytes, "all workers together (x N)", lambda m, N, b: 2*(N-1)*P(m)*b)
attempt(exercises.check_ring_allreduce_bytes, "forgot bytes_per_number", lambda m, N, b: 2*(N-1)/N*P(m))
attempt(exercises.check_ring_allreduce_bytes, "counts p.grad (None on a fresh model)", lambda m, N, b: 2*(N-1)/N*sum(p.grad.numel() for p in m.parameters() if p.grad is not None)*b)
attempt(exercises.check_ring_allreduce_bytes, "bits not bytes (x8)", lambda m, N, b: 8*2*(N-1)/N*P(m)*b)
attempt(exercises.check_ring_allreduce_bytes, "(N-1)/N x 2 bytes? uses 2(N-1)/N but over P/N numbers", lambda m, N, b: 2*(N-1)/N*P(m)/N*b)
attempt(exercises.check_ring_allreduce_bytes, "correct, integer math", lambda m, N, b: 2*(N-1)*P(m)*b // N)
attempt(exercises.check_ring_allreduce_bytes, "correct, unique by data_ptr", lambda m, N, b: 2*(N-1)/N*sum(p.numel() for p in {p.data_ptr(): p for p in m.parameters() if p.requires_grad}.values())*b)
attempt(exercises.check_ring_allreduce_bytes, "correct, named_parameters", lambda m, N, b: 2*(N-1)/N*sum(p.numel() for _, p in m.named_parameters() if p.requires_grad)*b)
attempt(exercises.check_ring_allreduce_bytes, "correct, returns a tensor", lambda m, N, b: torch.tensor(2*(N-1)/N*P(m)*b))
