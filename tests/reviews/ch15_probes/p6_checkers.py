"""Self-checks of chapter 15: realistic wrong answers and correct variants."""
import torch, torch.nn.functional as F, io, contextlib
torch.set_num_threads(1)
from mtlib import exercises

def run(check, fn, label):
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            check(fn)
        print(f"  PASS   {label}: {buf.getvalue().strip()}")
    except exercises.CheckFailed as e:
        msg = str(e).replace("\n", " | ")
        print(f"  REJECT {label}: {msg[:300]}")
    except Exception as e:
        print(f"  CRASH  {label}: {type(e).__name__}: {e}")

print("rel_shift, correct variants")
def roll_rows(x):  # roll each row left by T-1-i
    t, k = x.shape[-2:]
    return torch.stack([torch.roll(x[..., i, :], -(t - 1 - i), dims=-1) for i in range(t)], dim=-2)
def flip_gather(x):  # flip to ascending distance, then gather distance i+M-j
    t, k = x.shape[-2:]; xf = x.flip(-1)
    i = torch.arange(t)[:, None]; j = torch.arange(k)[None, :]
    return torch.gather(xf, -1, (i + k - t - j).clamp(0, k - 1).expand(x.shape))
def as_strided_view(x):  # the 'skew' via as_strided on a padded contiguous copy
    *lead, t, k = x.shape
    p = F.pad(x, (1, 0)).contiguous()
    flat = p.reshape(*lead, -1)[..., t:]  # drop the first t entries = first row of the (K+1, T) view
    return flat.reshape(*lead, t, k)
def hf_style(x):  # transformers' old TransfoXL _rel_shift on (..., T, K): zero pad cat, view, drop
    *lead, t, k = x.shape
    zero = torch.zeros(*lead, t, 1, dtype=x.dtype)
    p = torch.cat([zero, x], -1).view(*lead, k + 1, t)
    return p[..., 1:, :].reshape_as(x)
for f, lab in [(roll_rows, "per-row torch.roll"), (flip_gather, "flip then gather"), (as_strided_view, "flat drop of T entries"), (hf_style, "HF/original TransfoXL _rel_shift")]:
    run(exercises.check_rel_shift, f, lab)

print("rel_shift, wrong answers")
def shift_by_i(x):  # row i moved left by i instead of T-1-i
    t, k = x.shape[-2:]
    return torch.stack([torch.roll(x[..., i, :], -i, dims=-1) for i in range(t)], dim=-2)
def roll_wrap_right(x):  # roll the other way
    t, k = x.shape[-2:]
    return torch.stack([torch.roll(x[..., i, :], (t - 1 - i), dims=-1) for i in range(t)], dim=-2)
def two_d_only(x):  # works only for 2-D input
    t, k = x.shape
    return F.pad(x, (1, 0)).reshape(k + 1, t)[1:].reshape(t, k)
def view_T_by_K1(x):  # reads the padded buffer as (T, K+1) (a no-op) and drops the pad column
    *lead, t, k = x.shape
    return F.pad(x, (1, 0)).reshape(*lead, t, k + 1)[..., 1:]
def no_pad(x):  # reshape without the zero column
    *lead, t, k = x.shape
    return x.reshape(*lead, k, t).transpose(-2, -1).reshape(*lead, t, k)
def gather_neg(x):  # uses distance j - i - M (sign flip)
    t, k = x.shape[-2:]
    i = torch.arange(t)[:, None]; j = torch.arange(k)[None, :]
    return torch.gather(x, -1, (k - 1 - (j - i - (k - t))).clamp(0, k - 1).expand(x.shape))
def uses_T_for_M(x):  # query i sits at i + T (assumes M == T)
    t, k = x.shape[-2:]
    i = torch.arange(t)[:, None]; j = torch.arange(k)[None, :]
    return torch.gather(x, -1, (k - 1 - (i + t - j)).clamp(0, k - 1).expand(x.shape))
def float32_cast(x):  # correct but computes in float32
    return as_strided_view(x.float())
for f, lab in [(shift_by_i, "row i shifted by i"), (roll_wrap_right, "roll the wrong way"), (two_d_only, "2-D only"),
               (view_T_by_K1, "reads the buffer as (T, K+1): drops the pad, no shift"), (no_pad, "reshape without the pad column"),
               (gather_neg, "distance sign flipped"), (uses_T_for_M, "M assumed equal to T"), (float32_cast, "float32 inside (correct otherwise)")]:
    run(exercises.check_rel_shift, f, lab)

print("update_memory, correct variants")
def upd_data(mem, hidden, L):
    both = torch.cat([mem, hidden.data], 1); return both[:, both.shape[1] - min(L, both.shape[1]):]
def upd_neg(mem, hidden, L):
    both = torch.cat([mem, hidden], 1).detach(); return both[:, -L:] if L else both[:, :0]
def upd_split(mem, hidden, L):  # keep tail of memory + tail of hidden
    keep_h = hidden[:, -L:] if L else hidden[:, :0]
    keep_m = mem[:, mem.shape[1] - max(0, min(mem.shape[1], L - keep_h.shape[1])):] if L > hidden.shape[1] else mem[:, :0]
    return torch.cat([keep_m, keep_h.detach()], 1)
for f, lab in [(upd_data, ".data instead of detach"), (upd_neg, "[-L:] with a mem_len 0 branch"), (upd_split, "tails of each, then cat")]:
    run(exercises.check_update_memory, f, lab)

print("update_memory, wrong answers")
def neg_start(mem, hidden, L):  # both.shape[1] - L can go negative
    both = torch.cat([mem, hidden], 1).detach(); return both[:, both.shape[1] - L:]
def detach_inplace(mem, hidden, L):  # detaches the caller's hidden in place
    hidden.detach_()
    both = torch.cat([mem, hidden], 1); return both[:, max(0, both.shape[1] - L):]
def clone_only(mem, hidden, L):
    both = torch.cat([mem, hidden], 1).clone(); return both[:, max(0, both.shape[1] - L):]
def keeps_only_mem_len_of_hidden(mem, hidden, L):  # forgets the old memory entirely
    return hidden[:, max(0, hidden.shape[1] - L):].detach()
def wrong_dim(mem, hidden, L):
    both = torch.cat([mem, hidden], 2).detach(); return both[:, max(0, both.shape[1] - L):]
def mutates_mem(mem, hidden, L):  # in-place on the old memory buffer (a slice copy)
    both = torch.cat([mem, hidden.detach()], 1)
    out = both[:, max(0, both.shape[1] - L):]
    if mem.shape[1] >= out.shape[1] and out.shape[1] > 0:
        mem[:, : out.shape[1]].copy_(out); return mem[:, : out.shape[1]]
    return out
def returns_oldest_when_short(mem, hidden, L):  # keeps [:L] only when M+T > 2L
    both = torch.cat([mem, hidden], 1).detach(); return both[:, -L:] if L else both[:, :0]
for f, lab in [(neg_start, "both[:, n - L:] (negative start when M+T < L)"), (detach_inplace, "hidden.detach_() (breaks the caller's graph)"),
               (clone_only, ".clone() instead of .detach()"), (keeps_only_mem_len_of_hidden, "old memory dropped"),
               (wrong_dim, "cat along the feature axis"), (mutates_mem, "writes into the old memory in place")]:
    run(exercises.check_update_memory, f, lab)

# does the in-place detach_ harm the caller? show it
leaf = torch.randn(1, 3, 2, requires_grad=True); h = leaf * 1.0
detach_inplace(torch.zeros(1, 0, 2), h, 2)
print("after hidden.detach_(): caller's hidden.requires_grad =", h.requires_grad)
