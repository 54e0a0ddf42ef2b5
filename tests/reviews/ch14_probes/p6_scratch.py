# Probe 6: is "scratch overfits before it learns the frequencies" a property of scratch training, or of
# this fine-tuning recipe (lr 1e-3, no weight decay, a T5 head without output bias)? seed 0, 300 steps.
import sys, time, torch
torch.set_num_threads(1)
from torch import nn
from mtlib.experiments import t5_pretrain as tp
uni = tp.unigram_baseline()["loss"]
def with_bias(m):
    head = nn.Linear(m.config.d_model, m.config.vocab_size, bias=True)
    head.weight = m.shared.weight
    nn.init.zeros_(head.bias)
    m.lm_head = head
    return m
arms = {"scratch lr 1e-3 (the chapter)": (lambda: tp.new_model(0), {}),
        "scratch lr 3e-3": (lambda: tp.new_model(0), {"lr": 3e-3}),
        "scratch + learned output bias": (lambda: with_bias(tp.new_model(0)), {})}
for name in sys.argv[1:] or arms:
    make, over = arms[name]
    t = time.time()
    h = tp.train_run(make(), tp.fill_stream(32, 0), tp.finetune_settings(**over), seed=0, eval_fn=tp.fill_metrics)
    ev = {e["step"]: e for e in h.evals}
    best = min(h.evals, key=lambda e: e["loss"])
    print(f"{name:<32} loss@100 {ev[100]['loss']:.2f} @300 {ev[300]['loss']:.2f}; best {best['loss']:.2f} at step {best['step']}; "
          f"top5@300 {ev[300]['top5']:.3f}; unigram {uni:.2f}  ({time.time()-t:.0f}s)", flush=True)
