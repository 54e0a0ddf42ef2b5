"""Re-review probe 6 (saved seed-0 ViT): under each fill, how often occlusion's top patch is a
blank one (where the fill *adds* ink), and gradient x (x - fill): the first-order term of each
reference, the matched analogue of the chapter's gradient x (x - background)."""
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split

torch.set_num_threads(1)
models, _ = dg.load_checkpoint()
vit = models["vit"].eval()
data = digits_split()
x, y = data.x_test, data.y_test
B = len(x)


def per_patch(v):
    return v.reshape(B, 1, 4, 2, 4, 2).sum((1, 3, 5)).reshape(B, -1)


xg = x.clone().requires_grad_(True)
vit(xg).log_softmax(-1).gather(1, y[:, None]).sum().backward()
grad = xg.grad.detach()
vit.zero_grad(set_to_none=True)
inked = per_patch(x - data.background) > 1e-4
mean_img = data.x_train.mean(0, keepdim=True)
for fill in dg.FILLS:
    drop = dg.occlusion_reference(vit, data, fill)
    top_blank = (~inked.gather(1, drop.argmax(-1, keepdim=True))).float().mean()
    blank_drop, inked_drop = drop[~inked].mean(), drop[inked].mean()
    line = (f"{fill:>10}: occlusion's top patch blank in {top_blank:.1%} of images; mean drop on blank "
            f"patches {blank_drop:+.3f}, on inked {inked_drop:+.3f}")
    if fill == "mean":
        gi = per_patch(grad * (x - mean_img))
        line += f"; grad x (x - mean): corr {dg.rowwise_correlation(drop, gi).nanmean():+.3f}"
    print(line)
