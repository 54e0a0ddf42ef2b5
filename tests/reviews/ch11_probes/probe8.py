import torch, warnings
torch.set_num_threads(1)
from mtlib import exercises
from mtlib.models import ViT, ViTConfig, attention_rollout
from mtlib.experiments import digits as dg
from mtlib.data.digits import digits_split
# device mismatch simulated with the meta device (what a learner who writes device=device gets on a GPU)
def dev_learner(att, alpha, device="meta"):
    R=None
    for w in att:
        a = (1-alpha)*w.mean(1) + alpha*torch.eye(w.shape[-1], device=device)
        R = a if R is None else a @ R
    return R
try: exercises.check_alpha_rollout(dev_learner)
except Exception as e: print("device-mismatch learner:", type(e).__name__, str(e).replace("\n"," | ")[:300])
# --- rollout trap: one image's (H, T, T) attentions, as HF's outputs.attentions[l][0] gives
torch.manual_seed(0)
att = [torch.randn(2, 4, 5, 5).softmax(-1) for _ in range(3)]
per_image = [a[0] for a in att]  # (H, T, T)
r_img = attention_rollout(per_image)
r_ref = attention_rollout(att)[0]
print("rollout of (H,T,T) list: shape", tuple(r_img.shape), "; r_img[0] == head-mean rollout of image 0?", torch.allclose(r_img[0], r_ref), "; max diff", f"{(r_img[0]-r_ref).abs().max():.3f}")
# --- train-mode attentions are post-dropout
data = digits_split()
models, _ = dg.load_checkpoint()
vit = models["vit"]
vit.train()
with torch.no_grad():
    _, a_train = vit.forward_features(data.x_test[:8], return_attentions=True)
rs = a_train[0].sum(-1)
print(f"train-mode attention rows sum to {rs.min():.2f}..{rs.max():.2f}; rollout(train) vs rollout(eval) max diff:", end=" ")
vit.eval()
with torch.no_grad():
    _, a_eval = vit.forward_features(data.x_test[:8], return_attentions=True)
print(f"{(attention_rollout(a_train)-attention_rollout(a_eval)).abs().max():.3f}")
# alpha=0 (residual=False): no renormalisation, rows of a train-mode product do not sum to 1
print("rollout(train-mode, residual=False) row sums", f"{attention_rollout(a_train, residual=False).sum(-1).min():.2f}..{attention_rollout(a_train, residual=False).sum(-1).max():.2f}")
# --- occlusion_importance leaves the model in eval mode
m = dg.make_model("vit", seed=0); m.train()
dg.occlusion_importance(m, data.x_test[:4], data.y_test[:4], patch=2, fill=data.background)
print("after occlusion_importance, model.training =", m.training)
m.train(); dg.accuracy(m, data.x_test[:4], data.y_test[:4]); print("after accuracy, model.training =", m.training)
# --- rollout with a float mask-less but batch==heads ambiguity: (B,H,T,T) where someone passes att.mean(1) -> fine
# --- position_similarity with a 2-D (1+N, d) tensor whose N is not a square
try:
    print(dg.position_similarity(torch.randn(10, 64))[0].shape)
except Exception as e: print("position_similarity non-square:", type(e).__name__, str(e)[:120])
# --- shuffle_patches with a 3-D order / wrong length
try:
    print("shuffle with order of 15:", tuple(dg.shuffle_patches(data.x_test[:2], torch.randperm(15), patch=2).shape))
except Exception as e: print("shuffle_patches bad order:", type(e).__name__, str(e)[:150])
try:
    o = torch.tensor([0]*16)
    print("shuffle with a non-permutation order accepted, shape:", tuple(dg.shuffle_patches(data.x_test[:2], o, patch=2).shape))
except Exception as e: print("non-perm:", type(e).__name__, str(e)[:150])
