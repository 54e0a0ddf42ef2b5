import time, torch
torch.set_num_threads(1)
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
data = digits_split()
_, report = dg.load_checkpoint()
quick = dg.TrainSettings(**{**report["settings"], "steps": 200, "warmup": 20})
for kind in ("mlp", "cnn"):
    t0 = time.process_time()
    m = dg.make_model(kind, seed=0)
    h = dg.train_classifier(m, data, quick, seed=0)
    sh = [dg.accuracy(m, dg.shuffle_patches(data.x_test, o, patch=2), data.y_test) for o in dg.SHUFFLES]
    print(f"{kind} 200 steps: test {h.last_eval()['test_accuracy']:.3f}; 20 patch shuffles: {min(sh):.3f} to {max(sh):.3f} (mean {sum(sh)/20:.3f}); cpu {time.process_time()-t0:.0f}s", flush=True)
