"""Re-review probe 4: is the resampled patch 'closest to the training data'? For each fill, the
mean distance of the occluded test images (every image x patch) to their nearest training image,
against the intact test images; and the saved ViT's accuracy on the occluded images."""
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
from mtlib.utils import fixed_generator

torch.set_num_threads(1)
models, _ = dg.load_checkpoint()
vit = models["vit"]
data = digits_split()
x, y, tr = data.x_test, data.y_test, data.x_train.flatten(1)
B = len(x)
others = data.x_train[torch.randint(len(tr), (B,), generator=fixed_generator(0))]
fills = {"background": torch.full_like(x, data.background),
         "mean": data.x_train.mean(0, keepdim=True).expand_as(x), "resample (one draw)": others}
print(f"intact test images: mean distance to the nearest training image {torch.cdist(x.flatten(1), tr).min(1).values.mean():.2f}")
for name, fill in fills.items():
    dist, acc, inked_dist = [], [], []
    for n in range(16):
        r, c = divmod(n, 4)
        o = x.clone()
        o[..., 2 * r:2 * r + 2, 2 * c:2 * c + 2] = fill[..., 2 * r:2 * r + 2, 2 * c:2 * c + 2]
        dist.append(torch.cdist(o.flatten(1), tr).min(1).values)
        with torch.no_grad():
            acc.append((vit(o).argmax(-1) == y).float())
    dist, acc = torch.stack(dist, 1), torch.stack(acc, 1)
    ink = (x - data.background).reshape(B, 1, 4, 2, 4, 2).sum((1, 3, 5)).reshape(B, -1) > 1e-4
    print(f"{name:>20}: nearest-training distance {dist.mean():.2f} (inked patches {dist[ink].mean():.2f}, "
          f"blank patches {dist[~ink].mean():.2f}); ViT accuracy on occluded images {acc.mean():.3f} "
          f"(inked {acc[ink].mean():.3f}, blank {acc[~ink].mean():.3f})")
