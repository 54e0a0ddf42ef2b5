"""Re-review probe 3: does the fill reversal hold beyond the one saved ViT? The script's recipe
compressed to 200 steps (the chapter's cell 16 recipe), training seeds 1 and 2, scored under the
three fills, with the model-free perturbation-size map |x - fill| beside ink."""
import sys
import time
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
from mtlib import utils

torch.set_num_threads(1)
models, report = dg.load_checkpoint()
data = digits_split()
quick = dg.TrainSettings(**{**report["settings"], "steps": 200, "warmup": 20})
for seed in [int(s) for s in sys.argv[1:]] or [1, 2]:
    t0 = time.time()
    with utils.unshifted():
        m = dg.make_model("vit", seed=seed)
        h = dg.train_classifier(m, data, quick, seed=seed)
    acc = h.last_eval()["test_accuracy"]
    line = [f"seed {seed} (200 steps, test {acc:.3f}, {time.time() - t0:.0f} s)"]
    for fill in dg.FILLS:
        a = dg.explanation_agreement(m, data, fill=fill)
        line.append(f"{fill}: rollout {a['rollout']:+.2f} ({a['rollout_inked']:+.2f}) ink {a['ink']:+.2f} "
                    f"({a['ink_inked']:+.2f}) top1 {a['top1_rollout']:.2f}/{a['top1_ink']:.2f}")
    print(" | ".join(line), f"[{time.time() - t0:.0f} s]", flush=True)
