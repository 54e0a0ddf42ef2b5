import time, torch
torch.set_num_threads(1)
t0=time.process_time()
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
from mtlib.models import attention_rollout
data = digits_split()
models, report = dg.load_checkpoint()
x, y = data.x_test, data.y_test
B = len(y)
ink = (x - data.background).reshape(B,1,4,2,4,2).sum((1,3,5)).reshape(B,16)
inked = ink > 1e-4
def occl(model, fills):
    """fills: list of (B or 1,1,8,8) replacement images; drop averaged over them"""
    model.eval(); res = 0
    with torch.no_grad():
        base = model(x).log_softmax(-1).gather(1, y[:,None])[:,0]
        for f in fills:
            out=[]
            for n in range(16):
                r,c = divmod(n,4)
                o = x.clone()
                o[..., 2*r:2*r+2, 2*c:2*c+2] = f.expand_as(x)[..., 2*r:2*r+2, 2*c:2*c+2]
                out.append(base - model(o).log_softmax(-1).gather(1, y[:,None])[:,0])
            res = res + torch.stack(out,1)
    return res/len(fills)
def corr(a,b): return float(dg.rowwise_correlation(a,b).nanmean())
g = torch.Generator().manual_seed(0)
fills = {
  "background": [torch.full((1,1,8,8), data.background)],
  "per-pixel train mean": [data.x_train.mean(0, keepdim=True)],
  "global mean (0)": [torch.zeros(1,1,8,8)],
  "patch of a random train image (x8)": [data.x_train[torch.randint(0, len(data.x_train), (B,), generator=g)] for _ in range(8)],
}
for mname in ("vit", "vit_nopos"):
    m = models[mname]
    with torch.no_grad():
        _, att = m.forward_features(x, return_attentions=True)
    roll = attention_rollout(att)[:,0,1:]
    for fname, f in fills.items():
        drop = occl(m, f)
        top = drop.argmax(-1)
        print(f"{mname:9} fill={fname:34}: rollout {corr(drop, roll):+.2f} (inked {dg._inked_correlation(drop, roll, inked):+.2f}), ink {corr(drop, ink):+.2f} (inked {dg._inked_correlation(drop, ink, inked):+.2f}); top1 rollout {(roll.argmax(-1)==top).float().mean():.2f} ink {(ink.argmax(-1)==top).float().mean():.2f}; mean drop {drop.mean():.3f}")
print("cpu", round(time.process_time()-t0,1))
