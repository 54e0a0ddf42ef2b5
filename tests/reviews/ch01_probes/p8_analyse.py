# Analyse the seed-0 models: per-position accuracy (which positions need the lookup), neighbours of the
# mirror, lengths beyond training, length-4 overlap with training data.
import time, torch
from defs import *
t0 = time.process_time()
files = {"without attention": "without_attention_0", "with attention": "with_attention_0",
         "no attention, d=72": "no_attention_d72_0", "uniform (trained)": "uniform_(trained)_0"}
models = {}
for n, f in files.items():
    m = build(n); m.load_state_dict(torch.load(f"ckpt/{f}.pt")); models[n] = m
print("== accuracy by length (reproduces cell 30?)")
for n, m in models.items():
    row = []
    for L in LENGTHS:
        _, _, _, c = eval_batch(m, L); row.append(f"{c.float().mean():.2f}/{c.all(1).float().mean():.2f}")
    print(f"{n:<20}", "  ".join(row))
print("== per-position token accuracy at length 20 (output step t reads source position 21-t)")
for n, m in models.items():
    _, _, _, c = eval_batch(m, 20)
    pos = c.float().mean(0)
    ends = torch.cat([pos[:3], pos[-3:]]).mean().item(); mid = pos[5:15].mean().item()
    print(f"{n:<20} first 3 steps {utils_r(pos[:3]) if False else [round(x,2) for x in pos[:3].tolist()]}, last 3 {[round(x,2) for x in pos[-3:].tolist()]}, middle steps 6-15 mean {mid:.2f}")
print("   (chance for one digit: 0.10)")
print("== where the attention weight goes (length 16, 500 held-out sources, seed 321 as cell 36)")
m = models["with attention"]
b = sequence_task(500, 16, 16, kind="reverse", generator=torch.Generator().manual_seed(321))
m.eval(); pred, w = m.greedy(b.src, b.lengths, 16, 1)
steps, mir = torch.arange(16), torch.arange(15, -1, -1)
on = w[:, steps, mir].mean().item()
nb = 0.0; cnt = 0
left = w[:, steps[:-1], mir[:-1] - 1].sum() ; right = w[:, steps[1:], mir[1:] + 1].sum()
neigh = (left + right).item() / 500 / 16
print(f"mirror {on:.3f}, mirror +-1 together {neigh:.3f}, further away {1 - on - neigh:.3f}")
# teacher-forced weights vs greedy weights: same?
logits, wt = m(b.src, b.lengths, b.tgt[:, :16])
print(f"teacher-forced mirror share {wt[:, steps, mir].mean().item():.3f}")
print("== beyond the training lengths (1..20), 300 sources each")
for n in ["with attention", "without attention", "uniform (trained)"]:
    row = []
    for L in (20, 22, 25, 30, 40):
        _, _, _, c = eval_batch(models[n], L, n=300, seed=777)
        row.append(f"L={L}: {c.float().mean():.2f}/{c.all(1).float().mean():.2f}")
    print(f"{n:<20}", "  ".join(row))
print("== held-out length-4 sources that occur in the training stream of cell 28 (seed 0)")
data = torch.Generator().manual_seed(0); seen = set()
for _ in range(STEPS):
    L = int(torch.randint(1, MAX_LEN + 1, (1,), generator=data))
    bb = sequence_task(64, L, L, kind="reverse", generator=data)
    if L <= 8: seen.update((L, tuple(r.tolist())) for r in bb.src)
for L in (4, 8):
    ho = sequence_task(500, L, L, kind="reverse", generator=torch.Generator().manual_seed(123 + L))
    frac = sum((L, tuple(r.tolist())) in seen for r in ho.src) / 500
    print(f"length {L}: {frac:.3f} of the 500 held-out sources were trained on")
print("cpu s", time.process_time() - t0)
