# Probe 6b: the same lr 3e-3 for the pretrained start (seed 0), and scratch lr 3e-3 on seed 1.
import time, torch
torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
uni = tp.unigram_baseline()["loss"]
rep = tp.load_pretrain()[1]
for name, make, seed in (("pretrained lr 3e-3, seed 0", lambda: tp.load_pretrain()[0]["pretrained"], 0),
                         ("scratch lr 3e-3, seed 1", lambda: tp.new_model(1), 1)):
    t = time.time()
    h = tp.train_run(make(), tp.fill_stream(32, seed), tp.finetune_settings(lr=3e-3), seed=seed, eval_fn=tp.fill_metrics)
    ev = {e["step"]: e for e in h.evals}
    print(f"{name:<28} loss@100 {ev[100]['loss']:.2f} @300 {ev[300]['loss']:.2f} top5@300 {ev[300]['top5']:.3f} "
          f"train loss last 20 {sum(h.loss[-20:])/20:.2f}; unigram {uni:.2f} ({time.time()-t:.0f}s)", flush=True)
for kind in ("pretrained", "scratch"):
    for s in range(5):
        ev = rep["runs"][f"{kind}/{s}"]["evals"]
        losses = [round(e["loss"], 2) for e in ev]
        print(kind, s, "held-out loss every 25 steps:", losses, "monotone non-increasing after step 100:",
              all(a >= b - 0.005 for a, b in zip(losses[3:], losses[4:])))
