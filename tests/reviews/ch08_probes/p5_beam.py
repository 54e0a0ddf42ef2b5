import torch, time, sys
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.data import PAD
h = tr.heldout_sample()
seed = int(sys.argv[1]); extra = len(sys.argv) > 2
t0 = time.process_time()
m, hist = tr.train_model(tr.TrainSettings(), seed=seed, steps=100)
print(f"seed {seed}: trained 100 steps in {time.process_time()-t0:.1f} s cpu", flush=True)
g = tr.decode(m, h.src); sg = tr.score(g, h)
configs = [("beam k=4 lp=0.6", dict(method="beam"))]
if extra: configs += [("beam k=4 lp=0", dict(method="beam", length_penalty=0.0)), ("beam k=1", dict(method="beam", beam_size=1))]
print(f"  greedy           exact {sg['exact']:.3f} token {sg['token']:.3f}")
for name, kw in configs:
    t = time.process_time(); b = tr.decode(m, h.src, **kw); s = tr.score(b, h)
    differ = (g != b).any(1)
    lg, lb = (g[differ] != PAD).sum(1), (b[differ] != PAD).sum(1)
    longer = (lb > lg).float().mean().item() if differ.any() else float('nan')
    other = (lb != lg).float().mean().item() if differ.any() else float('nan')
    # among distinct numbers
    print(f"  {name:16} exact {s['exact']:.3f} token {s['token']:.3f}; differ on {int(differ.sum())}; "
          f"other length {other:.0%}, longer {longer:.0%}  ({time.process_time()-t:.1f} s)", flush=True)
