# Probe 2: cell 43's break-it with two more arms: mtlib's own untied T5 v1.1 init (no tying), and an untied
# head with fan-in init (what T5X does). 40 steps, seeds given on the command line.
import sys, time, torch
torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
from mtlib.models.t5 import T5
from mtlib import utils
def make(kind, seed):
    utils.seed_everything(seed)
    if kind == "T5 (rescaled)":
        return T5(tp.model_config())
    m = T5(tp.model_config(tie_word_embeddings=False))
    if kind == "tied, no rescale":
        m.lm_head.weight = m.shared.weight
    if kind == "untied, fan-in head":
        with torch.no_grad(): m.lm_head.weight.normal_(0, 64 ** -0.5)
    return m
for seed in map(int, sys.argv[1:]):
    res = {}
    for kind in ("T5 (rescaled)", "tied, no rescale", "untied (mtlib init)", "untied, fan-in head"):
        t = time.time()
        s = tp.multitask_settings()
        h = tp.train_run(make(kind, seed), tp.task_stream(tp.TASKS, s.batch_size, seed), s, seed=seed, steps=40)
        res[kind] = h.loss
        print(f"seed {seed} {kind:>20}: step0 {h.loss[0]:5.1f} step10 {h.loss[10]:5.1f} mean30-39 {sum(h.loss[30:])/10:5.2f}  ({time.time()-t:.0f}s)", flush=True)
    base = res["T5 (rescaled)"]
    for k in res:
        if k != "T5 (rescaled)":
            print(f"   gap vs rescaled, {k}: step10 {res[k][10]-base[10]:+.1f}, steps30-39 {(sum(res[k][30:])-sum(base[30:]))/10:+.2f}")
