"""Fix 3 of the review: does each "break it" variant harm training? Held-out loss after STEPS
steps, simulated in one process (the mean of equal-shard gradients is the gradient of the
concatenated batch, section 13.1), for seeds 0..N-1. Usage: p12_harm.py N STEPS."""
import sys, time, torch
torch.set_num_threads(1)
from mtlib import distributed as du, train
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT

data = exp.dataset()
N, STEPS = int(sys.argv[1]), int(sys.argv[2])
B = exp.GLOBAL_BATCH

# a fixed held-out set of 512 windows that no arm reads; the arms sample the other 3584
split = torch.randperm(len(data), generator=torch.Generator().manual_seed(12345))
evalset, train_set = data[split[:512]], data[split[512:]]


def perm(seed):
    return du.shard_indices(len(train_set), 0, 1, shuffle=True, seed=seed)


def shard(seed, r):
    return du.shard_indices(len(train_set), r, 2, shuffle=True, seed=seed)

def heldout_after(seed, batches):
    """(held-out loss at the last step, mean of the held-out losses every 10 steps over the last 50)"""
    du.seed_all(seed)
    model = GPT(exp.model_config())

    def eval_fn(m):
        with torch.no_grad():
            return {"heldout": exp.loss_fn(m, evalset).item()}

    h = train.fit(model, exp.loss_fn, batches, steps=STEPS, lr=exp.LR, seed=seed, eval_fn=eval_fn, eval_every=10)
    late = [e["heldout"] for e in h.evals if e["step"] >= STEPS - 50]
    return h.evals[-1]["heldout"], sum(late) / len(late)

t0 = time.process_time()
rows = []
for seed in range(N):
    order, other = perm(seed), perm(seed + 1000)
    r0, r1 = shard(seed, 0), shard(seed + 1, 1)
    d = train_set
    v = {
        "correct": lambda s: d[order[s * B:(s + 1) * B]],
        "reshuffled": lambda s: d[other[s * B:(s + 1) * B]],
        "sampler seed = rank": lambda s: torch.cat([d[r0[s * 8:(s + 1) * 8]], d[r1[s * 8:(s + 1) * 8]]]),
        "no sampler": lambda s: d[order[s * 8:(s + 1) * 8]].repeat(2, 1),
    }
    res = {k: heldout_after(seed, b) for k, b in v.items()}
    rows.append(res)
    print(seed, {k: (round(a, 4), round(b, 4)) for k, (a, b) in res.items()}, f"cpu {time.process_time() - t0:.0f}s", flush=True)
for j, what in enumerate(("at the last step", "mean of the last 50 steps' evals")):
    print("held-out loss", what)
    for k in rows[0]:
        diff = [r[k][j] - r["correct"][j] for r in rows]
        print(f"  {k:<22} minus correct: min {min(diff):+.3f} max {max(diff):+.3f} mean {sum(diff) / len(diff):+.3f}")
    nos = [r["no sampler"][j] - max(r["correct"][j], r["reshuffled"][j]) for r in rows]
    print(f"  no sampler minus the larger of the two correct arms: min {min(nos):+.3f}")
