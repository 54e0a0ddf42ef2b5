import torch, torch.nn.functional as F, functools
torch.set_num_threads(1)
from mtlib import exercises
def run(name, chk, fn):
    try:
        chk(fn); print(f"[PASS] {name}")
    except exercises.CheckFailed as e:
        msg = str(e).replace("\n", " | ")
        print(f"[FAIL] {name}: {msg[:330]}")
    except Exception as e:
        print(f"[CRASH] {name}: {type(e).__name__}: {str(e)[:200]}")
P = exercises.check_patch_embedding
print("=== patches: correct variants")
run("tensor.unfold twice + permute", P, lambda x,p: x.unfold(2,p,p).unfold(3,p,p).permute(0,2,3,1,4,5).reshape(x.shape[0],-1,x.shape[1]*p*p))
run("nn.Unfold + mT", P, lambda x,p: torch.nn.Unfold(p, stride=p)(x).mT)
try:
    import einops
    run("einops", P, lambda x,p: einops.rearrange(x, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=p, p2=p))
except ImportError: print("einops not installed")
run("conv with identity kernel", P, lambda x,p: F.conv2d(x, torch.eye(x.shape[1]*p*p).reshape(-1, x.shape[1], p, p), stride=p).flatten(2).mT)
run("returns float64", P, lambda x,p: F.unfold(x.double(), p, stride=p).mT)
print("=== patches: wrong answers")
run("unfold without stride (overlapping)", P, lambda x,p: F.unfold(x, p).mT)
run("tensor.unfold without permute (C mixed)", P, lambda x,p: x.unfold(2,p,p).unfold(3,p,p).reshape(x.shape[0],-1,x.shape[1]*p*p))
run("uses h for both axes", P, lambda x,p: x.reshape(x.shape[0], x.shape[1], x.shape[2]//p, p, x.shape[2]//p, p).permute(0,2,4,1,3,5).reshape(x.shape[0], -1, x.shape[1]*p*p))
run(".view on permuted", P, lambda x,p: x.reshape(x.shape[0], x.shape[1], x.shape[2]//p, p, x.shape[3]//p, p).permute(0,2,4,1,3,5).view(x.shape[0], -1, x.shape[1]*p*p))
run("returns (B, Hp, Wp, Cpp) grid (no flatten of N)", P, lambda x,p: x.reshape(x.shape[0], x.shape[1], x.shape[2]//p, p, x.shape[3]//p, p).permute(0,2,4,1,3,5).reshape(x.shape[0], x.shape[2]//p, x.shape[3]//p, -1))
run("channels last + column-major", P, lambda x,p: x.reshape(x.shape[0], x.shape[1], x.shape[2]//p, p, x.shape[3]//p, p).permute(0,4,2,3,5,1).reshape(x.shape[0], -1, x.shape[1]*p*p))
run("stack of loops, col-major outer loop", P, lambda x,p: torch.stack([x[:,:,r:r+p,c:c+p].reshape(x.shape[0],-1) for c in range(0,x.shape[3],p) for r in range(0,x.shape[2],p)],1))
run("drops the batch dim for B=1 (squeeze)", P, lambda x,p: F.unfold(x, p, stride=p).mT.squeeze(0))

A = exercises.check_alpha_rollout
def good(att, alpha):
    R = None
    for w in att:
        a = (1-alpha)*w.mean(1) + alpha*torch.eye(w.shape[-1])
        R = a if R is None else a @ R
    return R
print("=== alpha rollout: correct variants")
run("loop", A, good)
run("start from identity", A, lambda att, al: functools.reduce(lambda R, w: ((1-al)*w.mean(1)+al*torch.eye(w.shape[-1])) @ R, att, torch.eye(att[0].shape[-1]).expand(att[0].shape[0], -1, -1)))
from mtlib.models import attention_rollout
run("mtlib call", A, lambda att, al: attention_rollout(att, residual_weight=al))
run("renormalised rows", A, lambda att, al: good([w/w.sum(-1, keepdim=True) for w in att], al))
run("eye on the inputs' device/dtype, einsum", A, lambda att, al: functools.reduce(lambda R, a: torch.einsum('bij,bjk->bik', a, R), [(1-al)*w.mean(1)+al*torch.eye(w.shape[-1], dtype=w.dtype, device=w.device) for w in att]))
print("=== alpha rollout: wrong answers")
run("per-head rollout, then mean over heads", A, lambda att, al: functools.reduce(lambda R, a: a @ R, [(1-al)*w + al*torch.eye(w.shape[-1]) for w in att]).mean(1))
run("sum over heads instead of mean", A, lambda att, al: good([w.sum(1, keepdim=True) for w in att], al))
run("identity skipped on the first layer", A, lambda att, al: functools.reduce(lambda R, w: ((1-al)*w.mean(1)+al*torch.eye(w.shape[-1])) @ R, att[1:], att[0].mean(1)))
run("returns class-token row only", A, lambda att, al: good(att, al)[:, 0])
run("averages over the batch axis (mean(0))", A, lambda att, al: good([w.mean(0, keepdim=True).expand_as(w) for w in att], al))
run("softmax again", A, lambda att, al: good([w.softmax(-1) for w in att], al))
run("head mean over the wrong axis (mean(-1)) kept dims", A, lambda att, al: good([w.mean(2, keepdim=True).expand_as(w) for w in att], al))
run("transposed attention (keys as rows)", A, lambda att, al: good([w.mT for w in att], al))
run("if alpha: skip identity when alpha==0? (alpha or 0.5)", A, lambda att, al: good(att, al or 0.5))
run("reverse list (last layer first, right-multiplied)", A, lambda att, al: good(att[::-1], al))
