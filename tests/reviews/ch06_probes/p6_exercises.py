# Exercise checkers: realistic wrong answers (beyond the test file's) and correct variants.
import math, re, time, torch
torch.set_num_threads(1)
t0 = time.process_time()
from mtlib import exercises
from mtlib.exercises import CheckFailed

def run(checker, fn, label):
    try:
        import io, contextlib
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            checker(fn)
        print(f"  ACCEPTED  {label}")
    except CheckFailed as e:
        msg = str(e).replace("\n", " / ")
        print(f"  rejected  {label}\n            -> {msg[:260]}")
    except Exception as e:
        print(f"  CRASH     {label}: {type(e).__name__}: {str(e)[:200]}")

print("== Exercise 1: check_sinusoidal_encoding")
def t_good_annotated(L, d):  # The Annotated Transformer's div_term
    pe = torch.zeros(L, d); pos = torch.arange(0, L).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2) * -(math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div); pe[:, 1::2] = torch.cos(pos * div); return pe
def t_good_loops(L, d):
    pe = torch.zeros(L, d)
    for p in range(L):
        for i in range(d // 2):
            pe[p, 2 * i] = math.sin(p / 10000 ** (2 * i / d)); pe[p, 2 * i + 1] = math.cos(p / 10000 ** (2 * i / d))
    return pe
def t_good_stack(L, d):
    ang = torch.arange(L, dtype=torch.float64)[:, None] * 10000 ** (-torch.arange(d // 2) * 2 / d)
    return torch.stack([ang.sin(), ang.cos()], -1).reshape(L, d).float()
def t_positions_from_1(L, d):
    return t_good_annotated(L + 1, d)[1:]
def t_multiply(L, d):  # pos * 10000^(2i/d) instead of dividing
    pe = torch.zeros(L, d); pos = torch.arange(L)[:, None]; f = 10000 ** (torch.arange(0, d, 2) / d)
    pe[:, 0::2] = torch.sin(pos * f); pe[:, 1::2] = torch.cos(pos * f); return pe
def t_unsqueezed(L, d):  # Annotated Transformer's buffer shape (1, L, d)
    return t_good_annotated(L, d)[None]
def t_4i(L, d):  # i = arange(0, d, 2) AND 2*i: exponent 4i/d (mixing two conventions)
    i = torch.arange(0, d, 2); pos = torch.arange(L)[:, None]; ang = pos / 10000 ** (2 * i / d)
    pe = torch.zeros(L, d); pe[:, 0::2] = ang.sin(); pe[:, 1::2] = ang.cos(); return pe
def t_deg(L, d):  # base 1000 (typo)
    pos = torch.arange(L)[:, None]; ang = pos / 1000 ** (torch.arange(0, d, 2) / d)
    pe = torch.zeros(L, d); pe[:, 0::2] = ang.sin(); pe[:, 1::2] = ang.cos(); return pe
def t_t2t(L, d):  # tensor2tensor's get_timing_signal_1d: [sin | cos], increment log(1e4)/(d/2 - 1)
    n = d // 2; inc = math.log(10000.0) / (n - 1); inv = torch.exp(torch.arange(n) * -inc)
    ang = torch.arange(L)[:, None] * inv; return torch.cat([ang.sin(), ang.cos()], -1)
def t_t2t_interleaved(L, d):  # the same frequencies as tensor2tensor, but interleaved
    n = d // 2; inc = math.log(10000.0) / (n - 1); inv = torch.exp(torch.arange(n) * -inc)
    ang = torch.arange(L)[:, None] * inv; return torch.stack([ang.sin(), ang.cos()], -1).flatten(-2)
def t_intdiv(L, d):  # integer floor division in the exponent
    i = torch.arange(d // 2); pos = torch.arange(L)[:, None]; ang = pos / 10000 ** (2 * i // d)
    pe = torch.zeros(L, d); pe[:, 0::2] = ang.sin(); pe[:, 1::2] = ang.cos(); return pe
for fn, lab in ((t_good_annotated, "correct: Annotated Transformer div_term (float32)"),
                (t_good_loops, "correct: Python loops with math.sin"),
                (t_good_stack, "correct: stack + reshape, float64 angles"),
                (t_positions_from_1, "wrong: positions 1..L"),
                (t_multiply, "wrong: pos * 10000^(2i/d) (multiplies)"),
                (t_unsqueezed, "wrong: returns (1, L, d) like the Annotated Transformer's buffer"),
                (t_4i, "wrong: i = arange(0, d, 2) and 2*i (exponent 4i/d)"),
                (t_deg, "wrong: base 1000"),
                (t_intdiv, "wrong: 2*i // d (integer division: every frequency 1)"),
                (t_t2t, "tensor2tensor's own layout and frequencies ([sin|cos], log(1e4)/(d/2-1))"),
                (t_t2t_interleaved, "tensor2tensor frequencies, interleaved")):
    run(exercises.check_sinusoidal_encoding, fn, lab)

print("\n== Exercise 2: check_rope_rotation")
def r_complex(x, p):  # Meta Llama style
    d = x.shape[-1]; th = 10000 ** (-torch.arange(0, d, 2).float() / d)
    f = torch.polar(torch.ones(len(p), d // 2), p[:, None].float() * th)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(xc * f).flatten(-2)
def r_matrix(x, p):  # block-diagonal rotation matrices, row vectors: x @ R^T
    d = x.shape[-1]; th = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    out = []
    for t, m in enumerate(p.tolist()):
        R = torch.block_diag(*[torch.tensor([[math.cos(m * a), -math.sin(m * a)], [math.sin(m * a), math.cos(m * a)]]) for a in th.tolist()])
        out.append(x[..., t, :].double() @ R.T)
    return torch.stack(out, -2).float()
def r_repeat(x, p):  # cos/sin repeated per channel, rotate-every-two helper (GPT-J)
    d = x.shape[-1]; th = 10000 ** (-torch.arange(0, d, 2) / d); ang = (p[:, None] * th).repeat_interleave(2, -1)
    x1, x2 = x[..., 0::2], x[..., 1::2]; rot = torch.stack([-x2, x1], -1).flatten(-2)
    return x * ang.cos() + rot * ang.sin()
def r_cat_output(x, p):  # pairs right, but the chapter's cat writes the output in halves
    d = x.shape[-1]; th = 10000 ** (-torch.arange(0, d, 2) / d); ang = p[:, None] * th
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1)
def r_4i(x, p):  # i = arange(0, d, 2) and 2*i
    d = x.shape[-1]; i = torch.arange(0, d, 2); th = 10000 ** (-2 * i / d); ang = p[:, None] * th
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1).flatten(-2)
def r_sorted(x, p):  # assumes positions are contiguous from p[0]
    return r_repeat(x, torch.arange(p[0], p[0] + len(p)))
def r_swapped_cos_sin(x, p):  # (a sin - b cos, ...) typo: swapped cos/sin
    d = x.shape[-1]; th = 10000 ** (-torch.arange(0, d, 2) / d); ang = p[:, None] * th
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * ang.sin() - b * ang.cos(), a * ang.cos() + b * ang.sin()], -1).flatten(-2)
def r_inplace(x, p):  # edits x in place
    y = r_repeat(x, p); x.copy_(y); return x
def r_half_angle_count(x, p):  # theta over d//2 instead of d: 10000^(-i/(d/2))  == same as 2i/d? (check)
    d = x.shape[-1]; i = torch.arange(d // 2); th = 10000 ** (-i / (d // 2)); ang = p[:, None] * th
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1).flatten(-2)
def r_float16(x, p):  # computes in half precision
    return r_repeat(x.half(), p).float()
for fn, lab in ((r_complex, "correct: complex multiplication (Meta Llama style)"),
                (r_matrix, "correct: explicit block-diagonal rotation matrices"),
                (r_repeat, "correct: GPT-J rotate_every_two"),
                (r_half_angle_count, "correct: 10000^(-i/(Dh/2)) (same exponent written differently)"),
                (r_cat_output, "wrong: pairs (2i,2i+1) but output concatenated in halves"),
                (r_4i, "wrong: exponent 4i/Dh (arange(0, d, 2) and 2*i)"),
                (r_sorted, "wrong: positions assumed contiguous from positions[0]"),
                (r_swapped_cos_sin, "wrong: cos and sin swapped"),
                (r_inplace, "wrong: rotates x in place"),
                (r_float16, "borderline: computed in float16")):
    run(exercises.check_rope_rotation, fn, lab)

print("\n== Exercise 3: check_alibi_bias")
def a_good_bloom(H, q, k):  # slope * (j - i), relying on the causal mask? (not the spec: positive for future)
    s = 2.0 ** (-8 * torch.arange(1, H + 1) / H); i = torch.arange(k - q, k)[:, None]; j = torch.arange(k)[None]
    return (s[:, None, None] * -(i - j).abs())[None]
def a_good_loop(H, q, k):
    out = torch.zeros(1, H, q, k)
    for h in range(H):
        m = 2 ** (-8 * (h + 1) / H)
        for r in range(q):
            for c in range(k):
                out[0, h, r, c] = -m * abs((k - q + r) - c)
    return out
def a_good_geom(H, q, k):  # the paper's geometric sequence: start = 2^(-8/H), ratio = start
    start = 2 ** (-8 / H); s = torch.tensor([start ** (h + 1) for h in range(H)])
    d = (torch.arange(k - q, k)[:, None] - torch.arange(k)[None]).abs()
    return -(s[:, None, None] * d)[None]
def a_neg_j_minus_i(H, q, k):  # -m (j - i): rewards the past
    s = 2.0 ** (-8 * torch.arange(1, H + 1) / H); i = torch.arange(k - q, k)[:, None]; j = torch.arange(k)[None]
    return (-s[:, None, None] * (j - i))[None]
def a_bloom_style(H, q, k):  # Bloom/MPT: m * j (shift-invariant under softmax with a causal mask)
    s = 2.0 ** (-8 * torch.arange(1, H + 1) / H); j = torch.arange(k)[None].expand(q, k)
    return (s[:, None, None] * j)[None].float()
def a_slope_8_over_h(H, q, k):  # 2^(-8/h)
    s = torch.tensor([2 ** (-8 / h) for h in range(1, H + 1)]); d = (torch.arange(k - q, k)[:, None] - torch.arange(k)[None]).abs()
    return -(s[:, None, None] * d)[None]
def a_square_crop(H, q, k):  # builds (k, k) and takes the first q rows
    s = 2.0 ** (-8 * torch.arange(1, H + 1) / H); d = (torch.arange(k)[:, None] - torch.arange(k)[None]).abs()
    return -(s[:, None, None] * d)[None][:, :, :q]
def a_int(H, q, k):  # integer dtype bias (slopes rounded)
    d = (torch.arange(k - q, k)[:, None] - torch.arange(k)[None]).abs()
    return -(torch.arange(1, H + 1)[:, None, None] * d)[None]
def a_mtlib(H, q, k):
    from mtlib.positional import alibi_bias; return alibi_bias(H, q, k)
for fn, lab in ((a_good_bloom, "correct: vectorised"), (a_good_loop, "correct: loops"),
                (a_good_geom, "correct: the paper's geometric sequence"), (a_mtlib, "correct but trivial: mtlib.positional.alibi_bias (imported in cell 1)"),
                (a_neg_j_minus_i, "wrong: -m (j - i) (signed, the other way)"),
                (a_bloom_style, "Bloom-style m * j (equal after softmax under the causal mask)"),
                (a_slope_8_over_h, "wrong: slopes 2^(-8/h)"),
                (a_square_crop, "wrong: square (k, k) bias, first q rows"),
                (a_int, "wrong: integer slopes, integer dtype")):
    run(exercises.check_alibi_bias, fn, lab)

print("\n== GPU trap, simulated with the 'meta' device: a learner function that returns a tensor on another device")
def on_other_device(L, d):
    return t_good_annotated(L, d).to("meta")
run(exercises.check_sinusoidal_encoding, on_other_device, "correct values, on another device than the checker's CPU reference")
print(f"cpu seconds: {time.process_time() - t0:.1f}")
