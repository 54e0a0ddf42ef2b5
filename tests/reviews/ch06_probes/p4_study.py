"""Probe for chapter 6 (review of chapter 6, F17, F20, F21), cited in section 6.6.

Run from this folder: ``PYTHONPATH=<repo>:. python p4_study.py`` (about a minute of CPU).
Whole-sequence accuracy of three table models; T5 with Hugging Face's initial scale for the
bias table; the redraw / zero probe of the never-trained T5 buckets (3-back, seed 4).
"""

import time

import torch
from study_util import detail, train

from mtlib.experiments import extrapolation as ex

torch.set_num_threads(1)
t0 = time.process_time()

c1, c3 = ex.ExtrapolationConfig(shift=1), ex.ExtrapolationConfig(shift=3)


def line(name, d):
    return (
        f"{name}: tokens seen {d['seen_tok']:.3f} unseen {d['unseen_tok']:.3f} | whole sequence: positions <32 all right "
        f"{d['seen_seq']:.3f}, all 32 unseen right {d['unseen_seq']:.3f} | unseen 32-47 {d['p32_47']:.3f}, 48-63 {d['p48_63']:.3f}"
    )


models = {}
for scheme, seed in (("alibi", 0), ("rope", 0), ("t5", 4)):
    models[scheme] = m = ex.train(scheme, seed, c1)
    print(line(f"{scheme:>5} s=1 seed {seed}", detail(m, c1)))
    if scheme in ("rope", "t5"):
        print(line(f"{scheme:>5} s=1 seed {seed} window", detail(m, c1, window=32)))


# T5 with Hugging Face's init scale for the relative bias (std d_model**-0.5) instead of N(0, 1)
def hf_init(model):
    torch.nn.init.normal_(model.relative.relative_attention_bias.weight, std=32**-0.5)


for seed in (1, 4):
    m = train("t5", seed, c1, init=hf_init)
    ev = ex.evaluate(m, c1)
    w = ex.evaluate(m, c1, window=32)["unseen"]
    print(
        f"t5 HF-scale init, s=1 seed {seed}: L=32 {ev['L=32']:.3f} unseen {ev['unseen']:.3f} window {w:.3f}  (table, N(0,1): seed 1 / 4 unseen 0.69-0.71)"
    )
# the unverified redraw probe of cell 30: T5, 3-back, seed 4; redraw the never-trained buckets
m = ex.train("t5", 4, c3)
base = ex.evaluate(m, c3)["unseen"]
never = sorted(
    set(range(32)) - set(m.relative.bucket(-torch.arange(32), bidirectional=False).tolist())
)
w0 = m.relative.relative_attention_bias.weight.detach().clone()
out = []
for r in range(5):
    g = torch.Generator().manual_seed(100 + r)
    w = w0.clone()
    w[never] = torch.randn(len(never), w.shape[1], generator=g)
    m.relative.relative_attention_bias.weight.data.copy_(w)
    out.append(ex.evaluate(m, c3)["unseen"])
zero = w0.clone()
zero[never] = 0.0
m.relative.relative_attention_bias.weight.data.copy_(zero)
z = ex.evaluate(m, c3)["unseen"]
print(
    f"t5 s=3 seed 4: unseen {base:.3f}; redraw never-trained buckets {never[0]}..{never[-1]} (5 draws): "
    + ", ".join(f"{v:.2f}" for v in out)
    + f"; set them to 0: {z:.3f}"
)
print(f"cpu seconds: {time.process_time() - t0:.1f}")
