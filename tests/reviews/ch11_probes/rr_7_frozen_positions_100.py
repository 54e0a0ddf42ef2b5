"""Re-review probe 7: cell 25's hypothesis 'the ViT spends data on learning what the positions
mean'. On 100 training images, the 200-step recipe (cell 16), seed 0 and 1: learned positions
against the same random initial positions frozen (each patch still has its own code, nothing
about it is learned) and against no positions."""
import time
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
from mtlib import utils

torch.set_num_threads(1)
_, report = dg.load_checkpoint()
data = digits_split()
quick = dg.TrainSettings(**{**report["settings"], "steps": 200, "warmup": 20})
for seed in (0, 1):
    small = data.subset(100, seed=seed)
    out = []
    for name in ("learned", "frozen at init", "none"):
        t0 = time.time()
        with utils.unshifted():
            if name == "none":
                m = dg.make_model("vit_nopos", seed=seed)
            else:
                init = dg.make_model("vit", seed=seed).pos_embed.detach().clone()
                m = dg.make_model("vit", seed=seed, pos_embed=init, freeze_pos=name != "learned")
            h = dg.train_classifier(m, small, quick, seed=seed)
        out.append(f"{name} {h.last_eval()['test_accuracy']:.3f} ({time.time() - t0:.0f} s)")
    print(f"seed {seed}, 100 images, 200 steps:", "; ".join(out), flush=True)
