import time, torch
torch.set_num_threads(1)
t0=time.process_time()
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
from mtlib.models import attention_rollout
data = digits_split()
models, report = dg.load_checkpoint()
vit, nopos = models["vit"], models["vit_nopos"]
x, y = data.x_test, data.y_test
B = len(y)
pixels = x - data.background
ink = pixels.reshape(B,1,4,2,4,2).sum((1,3,5)).reshape(B,16)
inked = ink > 1e-4
def occl(model, fill_img):
    """fill_img: (1,1,8,8) or (B,1,8,8) replacement values"""
    model.eval()
    with torch.no_grad():
        base = model(x).log_softmax(-1).gather(1, y[:,None])[:,0]
        out=[]
        for n in range(16):
            r,c = divmod(n,4)
            o = x.clone()
            o[..., 2*r:2*r+2, 2*c:2*c+2] = fill_img.expand_as(x)[..., 2*r:2*r+2, 2*c:2*c+2]
            out.append(base - model(o).log_softmax(-1).gather(1, y[:,None])[:,0])
    return torch.stack(out,1)
def corr(a,b): return float(dg.rowwise_correlation(a,b).nanmean())
with torch.no_grad():
    _, att = vit.forward_features(x, return_attentions=True)
roll = attention_rollout(att)[:,0,1:]
mean_img = data.x_train.mean(0, keepdim=True)  # (1,1,8,8) per-pixel training mean
bg = torch.full((1,1,8,8), data.background)
print("== P4 occlusion reference: which fill? (seed-0 ViT)")
for fname, f in (("background (chapter)", bg), ("per-pixel training mean", mean_img)):
    drop = occl(vit, f)
    dev = (x - f).abs().reshape(B,1,4,2,4,2).sum((1,3,5)).reshape(B,16)  # size of the perturbation
    top = drop.argmax(-1)
    print(f"fill = {fname}: corr with occlusion: rollout {corr(drop, roll):+.2f}, ink {corr(drop, ink):+.2f}, |perturbation| {corr(drop, dev):+.2f}; "
          f"top1 rollout {(roll.argmax(-1)==top).float().mean():.3f} ink {(ink.argmax(-1)==top).float().mean():.3f}; share of drops exactly 0: {(drop.abs()<1e-7).float().mean():.2f}")
# the untrained model: how much of ink~occlusion is the perturbation itself?
print("== P4b an UNTRAINED ViT (seed 0 init) and the no-position ViT, background fill")
untrained = dg.make_model("vit", seed=0).eval()
for name, m in (("untrained vit", untrained), ("vit_nopos", nopos)):
    drop = occl(m, bg)
    with torch.no_grad():
        _, a = m.forward_features(x, return_attentions=True)
    r = attention_rollout(a)[:,0,1:]
    print(f"{name}: corr(occlusion, ink) {corr(drop, ink):+.2f}; corr(occlusion, rollout) {corr(drop, r):+.2f}; mean |drop| {drop.abs().mean():.4f}")
# rollout's top patch: how often blank?
print("== P4c rollout's top patch is a blank patch in", f"{(~inked.gather(1, roll.argmax(-1)[:,None])).float().mean():.1%}", "of test images; last-layer att top blank",
      f"{(~inked.gather(1, att[-1].mean(1)[:,0,1:].argmax(-1)[:,None])).float().mean():.1%}", "; share of blank patches", f"{(~inked).float().mean():.1%}")
# --- exercise 2's sweep
print("== P5 exercise 2: alpha sweep (background fill occlusion)")
drop = occl(vit, bg)
for alpha in (0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
    r = attention_rollout(att, residual_weight=alpha)[:,0,1:]
    inked_corr = dg._inked_correlation(drop, r, inked)
    print(f"alpha {alpha}: corr {corr(drop, r):+.3f}, inked only {inked_corr:+.3f}, rowwise NaN share {dg.rowwise_correlation(drop, r).isnan().float().mean():.2f}")
# first-order: mean over layers of the class token's row
m = sum(a.mean(1)[:,0,1:] for a in att)/3
print(f"mean of the 3 layers' class-token rows: corr {corr(drop, m):+.3f}; layer1 alone {corr(drop, att[0].mean(1)[:,0,1:]):+.3f}")
print("cpu", round(time.process_time()-t0,1))
