"""Re-review probe 8: (a) the stored top-1 chance and rollout top-1 per seed (blank fill);
(b) the no-position ViT's 'rollout ahead of ink' under each fill: the per-image paired
difference of correlations, its mean and a 2000-resample bootstrap interval over images."""
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
from mtlib.models.vit import attention_rollout

torch.set_num_threads(1)
models, report = dg.load_checkpoint()
data = digits_split()
print("top1_chance per seed:", [round(report["runs"][f"vit/{s}"]["agreement"]["top1_chance"], 4) for s in dg.SEEDS])
print("top1_rollout per seed:", [round(report["runs"][f"vit/{s}"]["agreement"]["top1_rollout"], 4) for s in dg.SEEDS])
x = data.x_test
B = len(x)
ink = (x - data.background).reshape(B, 1, 4, 2, 4, 2).sum((1, 3, 5)).reshape(B, -1)
m = models["vit_nopos"]
with torch.no_grad():
    _, att = m.forward_features(x, return_attentions=True)
roll = attention_rollout(att)[:, 0, 1:]
g = torch.Generator().manual_seed(0)
for fill in dg.FILLS:
    drop = dg.occlusion_reference(m, data, fill)
    diff = dg.rowwise_correlation(drop, roll) - dg.rowwise_correlation(drop, ink)
    diff = diff[~diff.isnan()]
    boot = torch.stack([diff[torch.randint(len(diff), (len(diff),), generator=g)].mean() for _ in range(2000)])
    print(f"vit_nopos {fill:>10}: mean per-image (rollout - ink) {diff.mean():+.3f}, "
          f"95% bootstrap {boot.quantile(0.025):+.3f} to {boot.quantile(0.975):+.3f}; "
          f"images where rollout wins {(diff > 0).float().mean():.1%}")
