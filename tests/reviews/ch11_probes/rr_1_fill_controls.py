"""Re-review probe 1: (a) the model-free 'perturbation size' map for each fill (the analogue of
ink for the blank fill), (b) the resample estimator's noise over 5 generator seeds, (c) the
Zintgraf et al. 2017 estimator (average the probability over draws, then the log / log-odds)
against the chapter's (average the log-probability drops)."""
import time
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
from mtlib.models.vit import attention_rollout
from mtlib.utils import fixed_generator

torch.set_num_threads(1)
t0 = time.time()
models, report = dg.load_checkpoint()
data = digits_split()
x, y = data.x_test, data.y_test
B, P = len(x), 2


def per_patch(v):  # (B, 1, 8, 8) -> (B, 16)
    return v.reshape(B, 1, 4, P, 4, P).sum((1, 3, 5)).reshape(B, -1)


def corr(a, b):
    return float(dg.rowwise_correlation(a, b).nanmean())


def logp_occluded(model, fill):  # (B, 16): log p(true) with patch n replaced; plus base
    out = []
    with torch.no_grad():
        base = model(x).log_softmax(-1).gather(1, y[:, None])[:, 0]
        for n in range(16):
            r, c = divmod(n, 4)
            o = x.clone()
            rs, cs = slice(r * P, r * P + P), slice(c * P, c * P + P)
            o[..., rs, cs] = fill[..., rs, cs]
            out.append(model(o).log_softmax(-1).gather(1, y[:, None])[:, 0])
    return base, torch.stack(out, 1)


for kind in ("vit", "vit_nopos"):
    m = models[kind].eval()
    with torch.no_grad():
        _, att = m.forward_features(x, return_attentions=True)
    roll = attention_rollout(att)[:, 0, 1:]
    ink = per_patch(x - data.background)
    # (a) mean fill: its own perturbation-size map
    mean_img = data.x_train.mean(0, keepdim=True)
    d_mean = dg.occlusion_reference(m, data, "mean")
    size_mean = per_patch((x - mean_img).abs())
    size_mean_sq = per_patch((x - mean_img) ** 2)
    print(f"{kind} mean fill: rollout {corr(d_mean, roll):+.3f}  ink {corr(d_mean, ink):+.3f}  "
          f"|x-mean| {corr(d_mean, size_mean):+.3f}  (x-mean)^2 {corr(d_mean, size_mean_sq):+.3f}")
    # (b)+(c) resample, 5 generator seeds
    for seed in range(5):
        g = fixed_generator(seed)
        drops, probs, sizes = [], [], []
        for _ in range(8):
            others = data.x_train[torch.randint(len(data.x_train), (B,), generator=g)]
            base, lp = logp_occluded(m, others)
            drops.append(base[:, None] - lp)
            probs.append(lp.exp())
            sizes.append(per_patch((x - others).abs()))
        drop = torch.stack(drops).mean(0)
        ref = dg.occlusion_reference(m, data, "resample", seed=seed)
        assert torch.allclose(drop, ref, atol=1e-5)
        size = torch.stack(sizes).mean(0)
        pbar = torch.stack(probs).mean(0)
        zlog = base[:, None] - pbar.log()  # log p(c|x) - log mean_k p(c|x with sample k)
        odds = lambda p: (p / (1 - p)).clamp_min(1e-12).log2()  # noqa: E731
        we = odds(base.exp()[:, None].clamp(max=1 - 1e-7)) - odds(pbar.clamp(max=1 - 1e-7))  # Zintgraf's WE
        top = drop.argmax(-1)
        print(f"{kind} resample seed {seed}: rollout {corr(drop, roll):+.3f} ink {corr(drop, ink):+.3f} "
              f"gap {corr(drop, roll) - corr(drop, ink):+.3f}  |x-other| {corr(drop, size):+.3f}  "
              f"top1 roll {(roll.argmax(-1) == top).float().mean():.3f} ink {(ink.argmax(-1) == top).float().mean():.3f} | "
              f"Zintgraf log-mean-p: roll {corr(zlog, roll):+.3f} ink {corr(zlog, ink):+.3f}; "
              f"WE: roll {corr(we, roll):+.3f} ink {corr(we, ink):+.3f}")
print(f"{time.time() - t0:.0f} s")
