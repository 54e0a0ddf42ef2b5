"""Break-it variants simulated in one process (a rank-averaged gradient over equal shards ==
the gradient of the concatenated batch). Per-step gap against the reference over 30 steps,
plus a held-out loss on a fixed set no variant trains on, at steps 30 and 200."""
import json, sys, time, torch
torch.set_num_threads(1)
from mtlib import distributed as du, train
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT

data = exp.dataset()
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200

def perm(seed):
    return du.shard_indices(len(data), 0, 1, shuffle=True, seed=seed)

def shard(seed, r):
    return du.shard_indices(len(data), r, 2, shuffle=True, seed=seed)

def run(init_seed, batches, scale=1.0, sgd=False, evalset=None):
    du.seed_all(init_seed)
    model = GPT(exp.model_config())
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9) if sgd else None
    evals = {}
    def eval_fn(m):
        with torch.no_grad():
            return {"heldout": exp.loss_fn(m, evalset).item()}
    h = train.fit(model, lambda m, b: scale * exp.loss_fn(m, b), batches, steps=STEPS, lr=exp.LR,
                  optimizer=opt, seed=init_seed, eval_fn=eval_fn, eval_every=30)
    return [l / scale for l in h.loss], {e["step"]: e["heldout"] for e in h.evals}

out = {}
t0 = time.process_time()
for seed in (0, 1, 2):
    p0, p1 = perm(seed), perm(seed + 100)
    s0, s1 = shard(seed, 0), shard(seed + 100, 1)
    evalset = data[p0[-512:]]  # never read in 200 steps by the correct runs (200*16=3200)
    variants = {
        "reference": lambda s: data[p0[s*16:(s+1)*16]],
        "correct DDP, other common sampler seed": lambda s: data[p1[s*16:(s+1)*16]],
        "sampler seed differs per rank": lambda s: torch.cat([data[shard(seed,0)[s*8:(s+1)*8]], data[s1[s*8:(s+1)*8]]]),
        "no sampler (8 distinct per step)": lambda s: data[p0[s*8:(s+1)*8]],
    }
    res = {}
    ref = None
    for name, b in variants.items():
        loss, ev = run(seed, b, evalset=evalset)
        if ref is None: ref = loss
        gap30 = max(abs(a - c) for a, c in zip(loss[:30], ref[:30]))
        res[name] = {"gap30": gap30, "gap_all": max(abs(a - c) for a, c in zip(loss, ref)),
                     "heldout30": ev.get(30), "heldout_end": ev.get(STEPS), "train_end_mean10": sum(loss[-10:])/10}
    # sum instead of mean under AdamW: loss x 2 (what a SUM all-reduce over 2 ranks does)
    loss2, ev2 = run(seed, variants["reference"], scale=2.0, evalset=evalset)
    res["AdamW, gradient x2 (sum all-reduce)"] = {"gap30": max(abs(a-c) for a,c in zip(loss2[:30], ref[:30])),
        "gap_all": max(abs(a-c) for a,c in zip(loss2, ref)), "heldout30": ev2.get(30), "heldout_end": ev2.get(STEPS)}
    # SGD: mean vs x2
    sg1, e1 = run(seed, variants["reference"], sgd=True, evalset=evalset)
    sg2, e2 = run(seed, variants["reference"], scale=2.0, sgd=True, evalset=evalset)
    res["SGD reference"] = {"loss0": sg1[0], "loss_end": sg1[-1], "heldout_end": e1.get(STEPS), "heldout30": e1.get(30)}
    res["SGD, gradient x2"] = {"gap30": max(abs(a-c) for a,c in zip(sg2[:30], sg1[:30])),
        "gap_all": max(abs(a-c) for a,c in zip(sg2, sg1)), "heldout30": e2.get(30), "heldout_end": e2.get(STEPS), "loss_end": sg2[-1]}
    out[seed] = res
    print("seed", seed, "cpu", round(time.process_time() - t0, 1), flush=True)
    for k, v in res.items():
        print(f"  {k:<42}", {a: (round(b, 4) if isinstance(b, float) else b) for a, b in v.items()}, flush=True)
json.dump(out, open("p_breakit.json", "w"), indent=1)
