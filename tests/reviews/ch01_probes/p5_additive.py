# Probe mtlib.attention.AdditiveAttention: masks of every rank, empty rows, dtypes, dropout, train/eval.
import torch
torch.set_num_threads(1)
from mtlib.attention import AdditiveAttention
from mtlib.masks import padding_mask
torch.manual_seed(0)
B, Tq, Tk, dq, dk, da, dv = 2, 3, 5, 6, 10, 8, 7
att = AdditiveAttention(dq, dk, da)
q, k, v = torch.randn(B, Tq, dq), torch.randn(B, Tk, dk), torch.randn(B, Tk, dv)
lengths = torch.tensor([5, 3])
def ref64(q, k, v, mask=None):
    Wq, Wk, w = (m.weight.double() for m in (att.q_proj, att.k_proj, att.score_proj))
    s = (torch.tanh((q.double() @ Wq.T)[:, :, None] + (k.double() @ Wk.T)[:, None]) @ w.T).squeeze(-1)
    if mask is not None: s = s.masked_fill(~mask, float("-inf"))
    a = s.softmax(-1); return a @ v.double(), a
def trial(label, mask):
    try:
        out, a = att(q, k, v, mask=mask)
        print(f"OK   {label}: mask {tuple(mask.shape) if mask is not None else None} -> out {tuple(out.shape)}, weights {tuple(a.shape)}")
        return out, a
    except Exception as e:
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:230]}")
pm = padding_mask(lengths)
print("padding_mask(lengths) shape", tuple(pm.shape), "; the docstring's padding_mask(lengths)[:, 0] shape", tuple(pm[:, 0].shape))
key_ok = torch.arange(Tk) < lengths[:, None]  # (B, Tk)
trial("(B,1,Tk) padding", key_ok[:, None, :])
trial("docstring's padding_mask(lengths)[:, 0]", pm[:, 0])
trial("padding_mask(lengths) as is, 4-D (B,1,1,Tk) (chapters 3-5 style)", pm)
trial("(B,Tk) padding, B != Tq", key_ok)
trial("(Tq,Tk) shared", torch.ones(Tq, Tk, dtype=torch.bool))
trial("(B,Tq,Tk) full", torch.ones(B, Tq, Tk, dtype=torch.bool))
trial("1-D (Tk,)", torch.ones(Tk, dtype=torch.bool))
trial("float 0/1 mask", key_ok[:, None, :].float())
trial("int mask", key_ok[:, None, :].int())
# ambiguous: B == Tq
q3 = torch.randn(3, 3, dq); k3 = torch.randn(3, Tk, dk)
try:
    att(q3, k3, k3[..., :dv], mask=(torch.arange(Tk) < torch.tensor([5, 3, 2])[:, None])); print("B==Tq (B,Tk) accepted!")
except Exception as e: print("B==Tq (B,Tk):", type(e).__name__, str(e)[:200])
# empty rows: data-built mask (B,Tq,Tk) with one query seeing nothing
m = torch.ones(B, Tq, Tk, dtype=torch.bool); m[1, 2] = False
out, a = att(q, k, v, mask=m)
print("fully masked row -> weights sum", a[1, 2].sum().item(), "out", out[1, 2].abs().max().item(), "(zeros); hand-written cell-24 version would give NaN")
# accuracy vs float64, with padding
out, a = att(q, k, v, mask=key_ok[:, None, :]); ro, ra = ref64(q, k, v, key_ok[:, None, :])
print("float32 vs float64: max |out| err %.2e" % (out.double() - ro).abs().max())
for dt in (torch.float16, torch.bfloat16):
    a2 = AdditiveAttention(dq, dk, da).to(dt); a2.load_state_dict({n: p.to(dt) for n, p in att.state_dict().items()})
    try:
        o2, w2 = a2(q.to(dt), k.to(dt), v.to(dt), mask=key_ok[:, None, :])
        print(f"{dt}: max |out| err vs float64 %.2e, weights err %.2e, weights dtype {w2.dtype}" % ((o2.double() - ro).abs().max(), (w2.double() - ra).abs().max()))
    except Exception as e: print(dt, "FAIL", type(e).__name__, str(e)[:150])
# large-scale scores: w large -> tanh bounded so scores bounded by ||w||_1
# dropout: weights returned after dropout in training mode
ad = AdditiveAttention(dq, dk, da, dropout=0.5); ad.load_state_dict(att.state_dict())
ad.train(); _, wt = ad(q, k, v, mask=key_ok[:, None, :]); ad.eval(); _, we = ad(q, k, v, mask=key_ok[:, None, :])
print("dropout=0.5: train-mode weight rows sum to", [round(x, 2) for x in wt[0].sum(-1).tolist()], "; eval-mode", [round(x, 2) for x in we[0].sum(-1).tolist()])
# inputs without a batch dim
try: att(q[0], k[0], v[0]); print("2-D inputs accepted")
except Exception as e: print("2-D (unbatched) inputs:", type(e).__name__, str(e)[:160])
# mismatched query dim
try: att(torch.randn(B, Tq, dk), k, v)
except Exception as e: print("query of width kdim:", type(e).__name__, str(e)[:160])
# gradient through a padded key is zero
qq = q.clone().requires_grad_(); kk = k.clone().requires_grad_()
o, _ = att(qq, kk, v, mask=key_ok[:, None, :]); o.sum().backward()
print("grad on padded keys:", kk.grad[1, 3:].abs().max().item())
# non-contiguous / expanded value (a view) ok?
o, _ = att(q, k, k[..., :dv].transpose(1, 2).transpose(1, 2))
print("mask on a different device check exists; value = sliced view works")
