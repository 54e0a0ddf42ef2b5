import torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib import exercises
from mtlib.models.gpt import top_k_filter, top_p_filter

def run(name, checker, fn):
    try:
        checker(fn); res = "PASSED"
    except AssertionError as e:
        res = "REJECTED: " + str(e).replace("\n", " | ")[:260]
    except Exception as e:
        res = f"CRASHED {type(e).__name__}: {str(e)[:200]}"
    print(f"[{name}] {res}")

ck, cp, cl = exercises.check_top_k_probs, exercises.check_top_p_probs, exercises.check_causal_lm_loss
print("=== top-k: correct variants")
run("softmax(top_k_filter) (the imported mtlib function)", ck, lambda x, k: torch.softmax(top_k_filter(x, k), -1))
def tk_thresh(x, k):
    k = min(k, x.shape[-1]); kth = x.topk(k, -1).values[..., -1:]
    p = torch.softmax(x, -1) * (x >= kth); return p / p.sum(-1, keepdim=True)
run("threshold on probabilities, divide by sum", ck, tk_thresh)
def tk_sort(x, k):
    v, i = x.sort(-1, descending=True); v = v.clone(); v[..., k:] = float("-inf")
    return torch.zeros_like(x).scatter(-1, i, torch.softmax(v, -1))
run("sort, cut, softmax, scatter back", ck, tk_sort)
def tk_float32(x, k):
    return torch.softmax(top_k_filter(x.float(), k), -1)
run("float32 computation", ck, tk_float32)
print("=== top-k: wrong answers")
run("returns filtered logits, not probs", ck, lambda x, k: top_k_filter(x, k))
run("softmax over dim 0", ck, lambda x, k: torch.softmax(top_k_filter(x, min(k, x.shape[-1])), 0))
def tk_naive_exp(x, k):
    k = min(k, x.shape[-1]); kth = x.topk(k, -1).values[..., -1:]
    e = x.exp() * (x >= kth); return e / e.sum(-1, keepdim=True)
run("naive exp (overflow-prone, should fail on a hard case)", ck, tk_naive_exp)
def tk_no_clip(x, k):
    kth = x.topk(k, -1).values[..., -1:]; return torch.softmax(x.masked_fill(x < kth, float("-inf")), -1)
run("no clip of k to V", ck, tk_no_clip)
def tk_gather(x, k):
    v, i = x.sort(-1, descending=True); v = v.clone(); v[..., min(k, x.shape[-1]):] = float("-inf")
    return torch.softmax(v, -1).gather(-1, i)  # wrong inverse permutation
run("unsort with gather instead of scatter", ck, tk_gather)
def tk_sorted_order(x, k):
    v, i = x.sort(-1, descending=True); v = v.clone(); v[..., min(k, x.shape[-1]):] = float("-inf")
    return torch.softmax(v, -1)  # forgot to put back in vocabulary order
run("forgot to unsort (sorted order)", ck, tk_sorted_order)
def tk_temp(x, k):
    return torch.softmax(top_k_filter(x, k) / 0.7, -1)
run("applies a temperature 0.7 by mistake", ck, tk_temp)
def tk_topk_probs_not_renorm_but_softmax_of_probs(x, k):
    p = torch.softmax(x, -1); kth = p.topk(min(k, x.shape[-1]), -1).values[..., -1:]
    return torch.softmax(p.masked_fill(p < kth, float("-inf")), -1)  # softmax of probabilities
run("softmax applied to probabilities", ck, tk_topk_probs_not_renorm_but_softmax_of_probs)

print("=== top-p: correct variants")
run("softmax(top_p_filter)", cp, lambda x, p: torch.softmax(top_p_filter(x, p), -1))
def tp_asc(x, p):  # HF-style ascending rule
    sp, i = torch.softmax(x, -1).sort(-1)  # ascending
    drop = sp.cumsum(-1) <= 1 - p; drop[..., -1] = False
    keep = ~drop.scatter(-1, i, drop)
    q = torch.softmax(x, -1) * keep; return q / q.sum(-1, keepdim=True)
run("HF ascending rule cumsum <= 1-p", cp, tp_asc)
def tp_searchsorted(x, p):
    pr = torch.softmax(x, -1); sp, i = pr.sort(-1, descending=True)
    n = (sp.cumsum(-1) < p).sum(-1, keepdim=True) + 1  # number kept
    keep_sorted = torch.arange(x.shape[-1]) < n
    keep = torch.zeros_like(keep_sorted).scatter(-1, i, keep_sorted)
    q = pr * keep; return q / q.sum(-1, keepdim=True)
run("count kept = #(cum < p) + 1", cp, tp_searchsorted)
print("=== top-p: wrong answers")
def tp_unsorted(x, p):
    pr = torch.softmax(x, -1); drop = pr.cumsum(-1) - pr >= p
    q = pr.masked_fill(drop, 0); return q / q.sum(-1, keepdim=True)
run("cumsum without sorting", cp, tp_unsorted)
def tp_gather(x, p):
    pr = torch.softmax(x, -1); sp, i = pr.sort(-1, descending=True)
    drop = (sp.cumsum(-1) - sp >= p).gather(-1, i)
    q = pr.masked_fill(drop, 0); return q / q.sum(-1, keepdim=True)
run("unsort with gather", cp, tp_gather)
def tp_ge(x, p):
    pr = torch.softmax(x, -1); sp, i = pr.sort(-1, descending=True)
    ds = sp.cumsum(-1) >= p; ds[..., 0] = False
    drop = ds.scatter(-1, i, ds); q = pr.masked_fill(drop, 0); return q / q.sum(-1, keepdim=True)
run("drop where cum >= p (drops the token that reaches p)", cp, tp_ge)
def tp_strict_nofirst(x, p):
    pr = torch.softmax(x, -1); sp, i = pr.sort(-1, descending=True)
    ds = sp.cumsum(-1) > p
    drop = ds.scatter(-1, i, ds); q = pr.masked_fill(drop, 0); return q / q.sum(-1, keepdim=True)
run("cum > p, first not forced", cp, tp_strict_nofirst)
def tp_on_logits(x, p):  # cumulative sum of logits instead of probabilities
    sl, i = x.sort(-1, descending=True); ds = sl.cumsum(-1) - sl >= p
    drop = ds.scatter(-1, i, ds); return torch.softmax(x.masked_fill(drop, float("-inf")), -1)
run("cumsum of logits, not probabilities", cp, tp_on_logits)
def tp_sorted_order(x, p):
    sp, i = torch.softmax(x, -1).sort(-1, descending=True)
    q = sp.masked_fill(sp.cumsum(-1) - sp >= p, 0); return q / q.sum(-1, keepdim=True)
run("forgot to unsort", cp, tp_sorted_order)
def tp_asc_wrong(x, p):  # sort ascending but apply the descending rule
    pr = torch.softmax(x, -1); sp, i = pr.sort(-1)
    ds = sp.cumsum(-1) - sp >= p
    drop = ds.scatter(-1, i, ds); q = pr.masked_fill(drop, 0); return q / q.sum(-1, keepdim=True)
run("sorted ascending (keeps the least likely)", cp, tp_asc_wrong)
def tp_dim0(x, p):
    pr = torch.softmax(x, 0); sp, i = pr.sort(-1, descending=True)
    ds = sp.cumsum(-1) - sp >= p
    drop = ds.scatter(-1, i, ds); q = pr.masked_fill(drop, 0); return q / q.sum(-1, keepdim=True)
run("softmax over dim 0", cp, tp_dim0)

print("=== causal LM loss: correct variants")
run("cross_entropy on (B, V, T-1)", cl, lambda lg, i: F.cross_entropy(lg[:, :-1].transpose(1, 2), i[:, 1:]))
run("log_softmax + gather", cl, lambda lg, i: -lg[:, :-1].log_softmax(-1).gather(-1, i[:, 1:, None]).mean())
run("mean of per-row means", cl, lambda lg, i: torch.stack([F.cross_entropy(lg[b, :-1], i[b, 1:]) for b in range(len(i))]).mean())
run("ignore_index on the last target", cl, lambda lg, i: F.cross_entropy(lg.reshape(-1, lg.shape[-1]), torch.cat([i[:, 1:], torch.full_like(i[:, :1], -100)], 1).reshape(-1)))
print("=== causal LM loss: wrong answers")
run("roll (wraps the last position)", cl, lambda lg, i: F.cross_entropy(lg.reshape(-1, lg.shape[-1]), i.roll(-1, 1).reshape(-1)))
run("sum / (B*T) instead of B*(T-1)", cl, lambda lg, i: F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), i[:, 1:].reshape(-1), reduction="sum") / i.numel())
run("nll on softmax (probs, not log)", cl, lambda lg, i: F.nll_loss(lg[:, :-1].softmax(-1).reshape(-1, lg.shape[-1]), i[:, 1:].reshape(-1)))
run("shift along the batch axis", cl, lambda lg, i: F.cross_entropy(lg[:-1].reshape(-1, lg.shape[-1]), i[1:].reshape(-1)) if len(i) > 1 else F.cross_entropy(lg[0], i[0]))
run("returns .item() (a float)", cl, lambda lg, i: F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), i[:, 1:].reshape(-1)).item())
run("cross_entropy on (B, T-1, V) unreshaped", cl, lambda lg, i: F.cross_entropy(lg[:, :-1], i[:, 1:]))
run("uses view on a non-contiguous slice", cl, lambda lg, i: F.cross_entropy(lg[:, :-1].view(-1, lg.shape[-1]), i[:, 1:].view(-1)))
run("label smoothing 0.1", cl, lambda lg, i: F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), i[:, 1:].reshape(-1), label_smoothing=0.1))
print("=== device: learner code that moves to cuda-like device (simulated with meta)")
