import time, torch
torch.set_num_threads(1)
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
data = digits_split()
_, report = dg.load_checkpoint()
settings = dg.TrainSettings(**report["settings"])
for n in (100, 300):
    accs = []
    for s in dg.SIZE_SEEDS:
        t0 = time.process_time()
        m = dg.make_model("mlp", seed=s)
        h = dg.train_classifier(m, data.subset(n, seed=s), settings, seed=s)
        accs.append(h.last_eval()["test_accuracy"])
        print(f"  mlp n={n} seed {s}: {accs[-1]:.3f} ({time.process_time()-t0:.0f}s cpu)", flush=True)
    vit = [report["sizes"][f"vit/{n}/{s}"] for s in dg.SIZE_SEEDS]; cnn = [report["sizes"][f"cnn/{n}/{s}"] for s in dg.SIZE_SEEDS]
    print(f"n={n}: MLP {[round(a,3) for a in accs]} mean {sum(accs)/3:.3f} | ViT {[round(a,3) for a in vit]} mean {sum(vit)/3:.3f} | CNN {[round(a,3) for a in cnn]} mean {sum(cnn)/3:.3f}", flush=True)
