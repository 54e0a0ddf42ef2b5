# Probe the chapter-1 self-checks with wrong answers NOT in tests/solutions/catalogue.py and correct variants.
import torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib import exercises
def run(label, checker, fn):
    try:
        checker(fn); print(f"ACCEPTED  {label}")
    except Exception as e:
        msg = str(e).replace("\n", " | ")
        print(f"rejected  {label}: {type(e).__name__}: {msg[:260]}")

print("=== check_softmax")
def no_keepdim(x, temperature=1.0):
    z = x / temperature; z = z - z.max(dim=-1).values
    return z.exp() / z.exp().sum(-1, keepdim=True)
def numpy_T_trick(x, temperature=1.0):  # (x.T - max).T idiom: fine for 1-D and 2-D, wrong for 3-D
    z = x / temperature
    z = (z.T - z.max(dim=-1).values).T
    e = z.exp(); return (e.T / e.sum(-1)).T
def hardcoded_dim1(x, temperature=1.0):
    z = x / temperature
    if z.dim() == 1: z = z[None]
    z = z - z.max(dim=1, keepdim=True).values; e = z.exp()
    return (e / e.sum(dim=1, keepdim=True)).reshape(x.shape)
def mixed_stable(x, temperature=1.0):  # stable numerator, naive denominator
    z = x / temperature
    return (z - z.max(-1, keepdim=True).values).exp() / z.exp().sum(-1, keepdim=True)
def log_softmax(x, temperature=1.0):
    return torch.log_softmax(x / temperature, -1)
def clamp_instead(x, temperature=1.0):
    z = (x / temperature).clamp(max=80); e = z.exp(); return e / e.sum(-1, keepdim=True)
def sub_mean(x, temperature=1.0):
    z = x / temperature; z = z - z.mean(-1, keepdim=True); e = z.exp(); return e / e.sum(-1, keepdim=True)
def temp_after(x, temperature=1.0):  # softmax first, then "sharpen" by power
    p = torch.softmax(x, -1) ** (1 / temperature); return p / p.sum(-1, keepdim=True)
def first_dim(x, temperature=1.0):  # normalise over dim 0 when 2-D
    return torch.softmax(x / temperature, dim=0)
def float64_out(x, temperature=1.0):
    return torch.softmax(x.double() / temperature, -1)
def max_not_scaled(x, temperature=1.0):  # correct: any per-row constant cancels
    z = x / temperature - x.max(-1, keepdim=True).values; e = z.exp(); return e / e.sum(-1, keepdim=True)
def via_logsumexp(x, temperature=1.0):
    z = x / temperature; return (z - torch.logsumexp(z, -1, keepdim=True)).exp()
for label, fn in [("missing keepdim in the max", no_keepdim), ("(x.T - max).T numpy idiom (wrong for 3-D)", numpy_T_trick),
                  ("dim=1 hard-coded (wrong for 3-D)", hardcoded_dim1), ("stable numerator, naive denominator", mixed_stable),
                  ("returns log-softmax", log_softmax), ("clamp scores at 80 instead of subtracting max", clamp_instead),
                  ("subtract the row mean", sub_mean), ("temperature as a power after softmax", temp_after), ("softmax over dim 0", first_dim),
                  ("CORRECT: float64 output", float64_out), ("CORRECT: subtract unscaled max", max_not_scaled), ("CORRECT: logsumexp", via_logsumexp),
                  ("CORRECT: F.softmax", lambda x, temperature=1.0: F.softmax(x / temperature, dim=-1))]:
    run(label, exercises.check_softmax, fn)
x3 = torch.randn(2, 3, 5)
for fn in (numpy_T_trick, hardcoded_dim1):
    try:
        print(fn.__name__, "on a (2,3,5) tensor: max err", (fn(x3) - torch.softmax(x3, -1)).abs().max().item())
    except Exception as e:
        print(fn.__name__, "on a (2,3,5) tensor raises", type(e).__name__, str(e)[:80])

print("=== check_soft_lookup")
import math
def soft_lookup_from_cell3(query, keys, values, temperature=1.0):  # cell 3, verbatim
    weights = torch.softmax(query @ keys.T / temperature, dim=-1)
    return weights @ values, weights
for label, fn in [
    ("cell 3's soft_lookup, first output (a copy of the page)", lambda q, k, v: soft_lookup_from_cell3(q, k, v)[0]),
    ("cell 3's soft_lookup as is (tuple)", soft_lookup_from_cell3),
    ("scaled by sqrt(d) (chapter 3 habit)", lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1) @ v),
    ("scores normalised by their sum, not softmax", lambda q, k, v: ((q @ k.T) / (q @ k.T).sum(-1, keepdim=True)) @ v),
    ("cosine similarity", lambda q, k, v: torch.softmax(F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).T, -1) @ v),
    ("weights transposed: v.T @ w.T", lambda q, k, v: (v.T @ torch.softmax(q @ k.T, -1).T)),
    ("negative distance scores", lambda q, k, v: torch.softmax(-torch.cdist(q, k) ** 2, -1) @ v),
    ("k @ q.T softmax dim=-1 then .T", lambda q, k, v: torch.softmax(k @ q.T, -1).T @ v),
    ("CORRECT: einsum", lambda q, k, v: torch.einsum("mn,nv->mv", torch.softmax(torch.einsum("md,nd->mn", q, k), -1), v)),
    ("CORRECT: k @ q.T softmax dim=0", lambda q, k, v: torch.softmax(k @ q.T, 0).T @ v),
    ("CORRECT: F.scaled_dot_product_attention(scale=1)", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0)),
    ("CORRECT: Python loop", lambda q, k, v: torch.stack([torch.softmax(k @ qi, -1) @ v for qi in q])),
]:
    run(label, exercises.check_soft_lookup, fn)

print("=== check_laplace_regression")
def nw_gauss_page(xq, xt, yt, bw):  # cell 7, verbatim (Gaussian)
    d = xq[:, None] - xt[None, :]; return (-(d**2) / (2 * bw**2)).softmax(-1) @ yt
for label, fn in [
    ("cell 7's Gaussian nadaraya_watson unchanged", nw_gauss_page),
    ("no abs: exp(-u/sigma)", lambda q, x, y, h: torch.softmax(-(q[:, None] - x) / h, -1) @ y),
    ("normalised over the queries (dim 0)", lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() / h, 0) @ y),
    ("kernel / (sum + 1e-12), 'fixes' the 0/0", lambda q, x, y, h: (lambda k: (k / (k.sum(-1, keepdim=True) + 1e-12)) @ y)(torch.exp(-(q[:, None] - x).abs() / h))),
    ("multiplies by the bandwidth", lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() * h, -1) @ y),
    ("distance matrix transposed (n, m)", lambda q, x, y, h: y @ torch.softmax(-(x[:, None] - q).abs() / h, 0)),
    ("Laplace with 1/(2 sigma)", lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() / (2 * h), -1) @ y),
    ("CORRECT: cdist", lambda q, x, y, h: torch.softmax(-torch.cdist(q[:, None], x[:, None]) / h, -1) @ y),
    ("CORRECT: n-by-m then dim 0", lambda q, x, y, h: y @ torch.softmax(-(x[:, None] - q).abs() / h, 0)),
    ("CORRECT: log-kernel minus logsumexp", lambda q, x, y, h: (lambda s: (s - s.logsumexp(-1, keepdim=True)).exp() @ y)(-(q[:, None] - x).abs() / h)),
    ("CORRECT (float64 inside)", lambda q, x, y, h: (torch.softmax(-(q.double()[:, None] - x.double()).abs() / h, -1) @ y.double())),
]:
    run(label, exercises.check_laplace_regression, fn)
