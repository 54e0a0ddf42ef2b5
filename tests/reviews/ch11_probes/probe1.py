import time, torch, math
torch.set_num_threads(1)
t0=time.process_time()
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
from mtlib.models import attention_rollout
data = digits_split()
models, report = dg.load_checkpoint()
vit, nopos = models["vit"], models["vit_nopos"]
runs = report["runs"]
# --- P1: did pos_embed move from its init?
print("== P1 pos_embed: trained vs its own init")
for s in dg.SEEDS:
    init = dg.make_model("vit", seed=s).pos_embed.detach()[0]   # (17,64)
    tr = torch.tensor(runs[f"vit/{s}"]["pos_embed"])
    cos = torch.nn.functional.cosine_similarity(init.flatten(), tr.flatten(), dim=0).item()
    si,_ = dg.position_similarity(init); st,_ = dg.position_similarity(tr)
    off = ~torch.eye(16, dtype=torch.bool)
    r = torch.corrcoef(torch.stack([si[off], st[off]]))[0,1].item()
    print(f"seed {s}: |init| {init[1:].norm(dim=-1).mean():.3f} |trained| {tr[1:].norm(dim=-1).mean():.3f} |trained-init| {(tr-init)[1:].norm(dim=-1).mean():.3f}; cos(init,trained) {cos:+.2f}; corr of similarity matrices init vs trained {r:+.2f}; r_dist(init) {dg.similarity_distance_correlation(init):+.2f} r_dist(trained) {dg.similarity_distance_correlation(tr):+.2f}")
# --- P2: does attention depend on grid distance?  mean attention distance (paper fig 7 right)
print("== P2 patch->patch attention vs grid distance (seed 0 vit; test images, and a blank image)")
dist = dg.grid_distances(4)  # (16,16)
def mad(model, x):
    with torch.no_grad():
        _, att = model.forward_features(x, return_attentions=True)
    out=[]
    for l,a in enumerate(att):
        p = a[:, :, 1:, 1:]  # (B,H,16,16) patch queries -> patch keys
        p = p / p.sum(-1, keepdim=True)
        md = (p * dist).sum(-1).mean((0,2))  # (H,) mean attention distance in patches
        near = (p * (dist==1)).sum(-1).mean().item()  # share on the 4-neighbours
        out.append((md, near))
    return out
uniform_md = (dist.sum(-1)/15).mean().item()  # uniform over the other 15 (excluding self)
uniform_md_self = (dist.sum(-1)/16).mean().item()
nb = ((dist==1).sum(-1).float()/16).mean().item()
print(f"uniform attention: mean distance {uniform_md_self:.2f} patches (incl. self), share on 4-neighbours {nb:.2f}")
blank = torch.full((1,1,8,8), data.background)
for name, m in (("vit", vit), ("vit_nopos", nopos)):
    for xname, x in (("test", data.x_test), ("blank", blank)):
        res = mad(m, x)
        print(f"{name:9} {xname:5}: " + "; ".join(f"L{l+1} dist per head {[round(v,2) for v in md.tolist()]} nbr {near:.2f}" for l,(md,near) in enumerate(res)))
# positional-only attention on the blank image for the trained vit: correlation of attention with distance
with torch.no_grad():
    _, att = vit.forward_features(blank, return_attentions=True)
off = ~torch.eye(16, dtype=torch.bool)
for l,a in enumerate(att):
    p = a[0].mean(0)[1:,1:]
    r = torch.corrcoef(torch.stack([p[off], dist[off]]))[0,1].item()
    print(f"blank image, layer {l+1}: corr(attention, distance) over patch pairs {r:+.2f}")
print("cpu so far", round(time.process_time()-t0,1))
