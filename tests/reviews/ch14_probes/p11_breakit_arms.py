# Probe 11 (lead, after review fix 2): section 14.6's break-it with its four arms, as the
# notebook now builds them, over seeds 0-9 (model, data stream and training seed all = seed).
# mtlib's untied head is now fan-in (T5X); "untied, N(0, 1) head" re-draws it as Hugging Face does.
import sys
import time

import torch

from mtlib import utils
from mtlib.experiments import t5_pretrain as tp
from mtlib.models.t5 import T5

torch.set_num_threads(1)


def make(kind, seed):
    utils.seed_everything(seed)
    if kind == "T5 (rescaled)":
        return T5(tp.model_config())
    m = T5(tp.model_config(tie_word_embeddings=False))
    if kind == "tied, no rescale":
        m.lm_head.weight = m.shared.weight
    if kind == "untied, N(0, 1) head":
        with torch.no_grad():
            m.lm_head.weight.normal_(0.0, 1.0)
    return m


KINDS = ("T5 (rescaled)", "tied, no rescale", "untied, fan-in head", "untied, N(0, 1) head")
for seed in map(int, sys.argv[1:]):
    res = {}
    for kind in KINDS:
        t = time.time()
        s = tp.multitask_settings()
        h = tp.train_run(make(kind, seed), tp.task_stream(tp.TASKS, s.batch_size, seed), s, seed=seed, steps=40)
        res[kind] = h.loss
        print(f"seed {seed} {kind:>21}: step0 {h.loss[0]:5.1f} step10 {h.loss[10]:5.1f} "
              f"mean30-39 {sum(h.loss[30:]) / 10:5.2f}  ({time.time() - t:.0f}s)", flush=True)
