"""Re-review probe 2: (a) the no-position ViT's resample gap (rollout - ink) over generator
seeds 1-4 (the assert is gap > 0.02; seed 0 gives 0.04); how rollout relates to ink;
(b) misuse: model mode and .grad after the helpers, fills of odd shapes, a non-ViT model."""
import time
import torch
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
from mtlib.models.vit import attention_rollout

torch.set_num_threads(1)
t0 = time.time()
models, report = dg.load_checkpoint()
data = digits_split()
x, y = data.x_test, data.y_test
B = len(x)


def per_patch(v):
    return v.reshape(B, 1, 4, 2, 4, 2).sum((1, 3, 5)).reshape(B, -1)


def corr(a, b):
    return float(dg.rowwise_correlation(a, b).nanmean())


ink = per_patch(x - data.background)
for kind in ("vit", "vit_nopos"):
    m = models[kind]
    with torch.no_grad():
        _, att = m.forward_features(x, return_attentions=True)
    roll = attention_rollout(att)[:, 0, 1:]
    print(f"{kind}: per-image corr(rollout, ink) {corr(roll, ink):+.3f}")
m = models["vit_nopos"]
with torch.no_grad():
    _, att = m.forward_features(x, return_attentions=True)
roll = attention_rollout(att)[:, 0, 1:]
for seed in (1, 2, 3, 4):
    d = dg.occlusion_reference(m, data, "resample", seed=seed)
    print(f"vit_nopos resample seed {seed}: rollout {corr(d, roll):+.3f} ink {corr(d, ink):+.3f} gap {corr(d, roll) - corr(d, ink):+.3f}")
print(f"({time.time() - t0:.0f} s)")

# (b) traps
vit = models["vit"]
vit.train()
dg.occlusion_importance(vit, x[:4], y[:4], patch=2, fill=data.background)
print("after occlusion_importance on a model in train mode: training =", vit.training)
vit.train()
small = dg.DigitsSplit(data.x_train, data.y_train, x[:20], y[:20], data.mean, data.std)
for p in vit.parameters():
    p.grad = None
dg.explanation_agreement(vit, small)
print("after explanation_agreement: training =", vit.training,
      "; parameters with a .grad left behind:", sum(p.grad is not None for p in vit.parameters()))
vit.eval()
for shape in [(1, 8, 8), (8,), (1, 1, 1, 1), (20, 1, 1, 1), (8, 1)]:
    try:
        dg.occlusion_importance(vit, x[:20], y[:20], patch=2, fill=torch.zeros(shape))
        print("fill shape", shape, "accepted")
    except ValueError as e:
        print("fill shape", shape, "ValueError:", str(e)[:60])
try:
    dg.occlusion_importance(vit, x[:20], y[:20], patch=2, fill=torch.zeros(1, 1, 2, 2))
except ValueError as e:
    print("fill shape (1, 1, 2, 2) (one patch) -> ValueError", str(e)[:50])
try:
    dg.occlusion_reference(models["cnn"] if "cnn" in models else dg.make_model("cnn", seed=0), small, "mean")
except AttributeError as e:
    print("occlusion_reference(cnn) ->", type(e).__name__, str(e)[:70])
print("blank_share under the mean fill:", dg.explanation_agreement(vit, small, fill="mean")["blank_share"],
      "(docstring: 'blanking those changes nothing')")
