import itertools, torch
torch.set_num_threads(1)
from mtlib import distributed as du
from mtlib.exercises import check_shard_indices
bad = 0; total = 0
for n, w, sh, dl, ep in itertools.product(range(1, 23), range(1, 10), (False, True), (False, True), (0, 7)):
    for r in range(w):
        s = torch.utils.data.DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=sh, seed=11, drop_last=dl)
        s.set_epoch(ep)
        total += 1
        bad += du.shard_indices(n, r, w, shuffle=sh, seed=11, epoch=ep, drop_last=dl) != list(s)
print(f"shard_indices vs DistributedSampler: {bad} mismatches of {total} (n 1..22, world 1..9, shuffle, drop_last, epochs)")
def pad_prefix(n, rank, w, drop_last):
    order = list(range(n))
    order = order[: n - n % w] if drop_last else order + order[: -n % w]
    return order[rank::w]
print("order + order[:padding] (the classic bug) on n=1, world 4:", [pad_prefix(1, r, 4, False) for r in range(4)],
      "vs", [du.shard_indices(1, r, 4) for r in range(4)], "-> the checker accepts it (no case with padding > n)")
