# Exercises 1-3: do the self-checks reject realistic wrong answers (with a useful hint) and accept correct variants?
import torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib import exercises
def attempt(checker, name, fn):
    try:
        checker(fn); verdict = "ACCEPTED"
    except AssertionError as e:
        verdict = "REJECTED: " + str(e).replace("\n", " || ")[:260]
    except Exception as e:
        verdict = f"CRASHED ({type(e).__name__}): {str(e)[:160]}"
    print(f"[{name}] {verdict}")

cf = exercises.check_feed_forward
print("== check_feed_forward: wrong")
attempt(cf, "transposed w1", lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2)
attempt(cf, "b1 after the ReLU", lambda x, w1, b1, w2, b2: (torch.relu(x @ w1) + b1) @ w2 + b2)
attempt(cf, "missing b2", lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2)
attempt(cf, "sigmoid instead of ReLU", lambda x, w1, b1, w2, b2: torch.sigmoid(x @ w1 + b1) @ w2 + b2)
attempt(cf, "tanh-GELU (GPT-2's)", lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2)
attempt(cf, "leaky ReLU 0.01", lambda x, w1, b1, w2, b2: F.leaky_relu(x @ w1 + b1) @ w2 + b2)
attempt(cf, "in-place relu on input", lambda x, w1, b1, w2, b2: torch.relu(x.relu_() @ w1 + b1) @ w2 + b2)
attempt(cf, "returns on another device (meta stands in for cuda)", lambda x, w1, b1, w2, b2: (torch.relu(x @ w1 + b1) @ w2 + b2).to("meta"))
print("== check_feed_forward: correct variants")
attempt(cf, "F.linear", lambda x, w1, b1, w2, b2: F.linear(F.relu(F.linear(x, w1.T, b1)), w2.T, b2))
attempt(cf, "clamp + einsum", lambda x, w1, b1, w2, b2: torch.einsum("...f,fd->...d", (torch.einsum("...d,df->...f", x, w1) + b1).clamp(min=0), w2) + b2)
attempt(cf, "float64 inside", lambda x, w1, b1, w2, b2: (torch.relu(x.double() @ w1.double() + b1.double()) @ w2.double() + b2.double()))

cl = exercises.check_layer_norm
print("== check_layer_norm: wrong")
def ln_naive(x, g, b, eps):  # E[x^2] - E[x]^2
    m = x.mean(-1, keepdim=True); v = (x * x).mean(-1, keepdim=True) - m * m
    return (x - m) / torch.sqrt(v + eps) * g + b
def ln_f32(x, g, b, eps):
    x = x.float(); m = x.mean(-1, keepdim=True); v = x.var(-1, keepdim=True, correction=0)
    return (x - m) / torch.sqrt(v + eps) * g.float() + b.float()
attempt(cl, "E[x^2]-E[x]^2", ln_naive)
attempt(cl, "cast to float32", ln_f32)
attempt(cl, "unbiased var", lambda x, g, b, eps: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * g + b)
attempt(cl, "gamma/beta swapped", lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], b, g, eps))
attempt(cl, "over the last two dims", lambda x, g, b, eps: (x - x.mean((-2, -1), keepdim=True)) / torch.sqrt(x.var((-2, -1), keepdim=True, correction=0) + eps) * g + b)
attempt(cl, "eps ignored (default 1e-5)", lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], g, b))
attempt(cl, "std(unbiased) + eps outside", lambda x, g, b, eps: (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * g + b)
attempt(cl, "RMSNorm (no mean subtraction)", lambda x, g, b, eps: x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g + b)
print("== check_layer_norm: correct variants")
attempt(cl, "F.layer_norm", lambda x, g, b, eps: F.layer_norm(x, x.shape[-1:], g, b, eps))
attempt(cl, "var_mean + rsqrt", lambda x, g, b, eps: (lambda v, m: (x - m) * torch.rsqrt(v + eps) * g + b)(*torch.var_mean(x, -1, keepdim=True, correction=0)))
attempt(cl, "centred mean of squares", lambda x, g, b, eps: (lambda c: c / torch.sqrt((c * c).mean(-1, keepdim=True) + eps) * g + b)(x - x.mean(-1, keepdim=True)))

cp, cq = exercises.check_post_ln_block, exercises.check_pre_ln_block
print("== check_post_ln_block: wrong")
def post_tuple(x, attn, ff, n1, n2):  # the habit from cell 25: self_attn(h)[0]
    x = n1(x + attn(x)[0]); return n2(x + ff(x))
def post_res_from_norm(x, attn, ff, n1, n2):
    h = n1(x); x = h + attn(x); return n2(x) + ff(n2(x))
def post_one_norm(x, attn, ff, n1, n2):
    x = x + attn(x); return n1(x + ff(x))
def post_ff_on_raw(x, attn, ff, n1, n2):
    h = n1(x + attn(x)); return n2(h + ff(x))
attempt(cp, "attn(x)[0] (tuple habit)", post_tuple)
attempt(cp, "norm then add both", post_res_from_norm)
attempt(cp, "one norm at the end", post_one_norm)
attempt(cp, "ff reads the block input", post_ff_on_raw)
print("== check_pre_ln_block: wrong")
def pre_res_from_normed(x, attn, ff, n1, n2):  # classic: the residual adds the NORMALISED input
    h = n1(x); x = h + attn(h); h = n2(x); return h + ff(h)
def pre_final_norm(x, attn, ff, n1, n2):
    x = x + attn(n1(x)); return n2(x + ff(x))
def pre_parallel(x, attn, ff, n1, n2):  # GPT-J parallel block
    return x + attn(n1(x)) + ff(n2(x))
def pre_tuple(x, attn, ff, n1, n2):
    x = x + attn(n1(x))[0]; return x + ff(n2(x))
attempt(cq, "residual from the normalised input", pre_res_from_normed)
attempt(cq, "norm2 after the last add", pre_final_norm)
attempt(cq, "parallel attn + ff (GPT-J)", pre_parallel)
attempt(cq, "attn(...)[0] (tuple habit)", pre_tuple)
print("== block checkers: correct variants")
def post_ok(x, attn, ff, n1, n2):
    h = x + attn(x); h = n1(h); out = h + ff(h); return n2(out)
def pre_ok(x, attn, ff, n1, n2):
    for sub, norm in ((attn, n1), (ff, n2)): x = x + sub(norm(x))
    return x
def pre_inplace(x, attn, ff, n1, n2):
    x = x.clone(); x += attn(n1(x)); x += ff(n2(x)); return x
attempt(cp, "post, step by step", post_ok)
attempt(cq, "pre, loop", pre_ok)
attempt(cq, "pre, in-place += on a clone", pre_inplace)
