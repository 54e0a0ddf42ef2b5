"""Chapter 7's self-checks: correct answers pass, the classic wrong answers are named."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises

# ---- feed-forward ---------------------------------------------------------------------------


def good_ffn(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def good_ffn_linear(x, w1, b1, w2, b2):  # a correct variant: F.linear takes (out, in) weights
    return F.linear(F.relu(F.linear(x, w1.T, b1)), w2.T, b2)


def ffn_no_activation(x, w1, b1, w2, b2):
    return (x @ w1 + b1) @ w2 + b2


def ffn_relu_after(x, w1, b1, w2, b2):
    return torch.relu((x @ w1 + b1) @ w2 + b2)


def ffn_gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1) @ w2 + b2


def ffn_transposed(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def ffn_no_bias(x, w1, b1, w2, b2):
    return torch.relu(x @ w1) @ w2


def ffn_no_b2(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2


def ffn_b1_after_relu(x, w1, b1, w2, b2):
    return (torch.relu(x @ w1) + b1) @ w2 + b2


def ffn_sigmoid(x, w1, b1, w2, b2):
    return torch.sigmoid(x @ w1 + b1) @ w2 + b2


def ffn_tanh_gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2


def ffn_on_meta(x, w1, b1, w2, b2):  # a result left on another device, with no values at all
    return good_ffn(x, w1, b1, w2, b2).to("meta")


def test_generic_ffn_hint_does_not_give_the_formula():
    def ffn_wrong_scale(x, w1, b1, w2, b2):
        return 2 * good_ffn(x, w1, b1, w2, b2)

    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_feed_forward(ffn_wrong_scale)
    message = str(info.value)
    assert "values differ" in message and "Hint: compare your code with the FFN's formula" in message
    assert "@" not in message and "relu(" not in message


def test_correct_feed_forward_passes(capsys):
    exercises.check_feed_forward(good_ffn)
    exercises.check_feed_forward(good_ffn_linear)
    assert capsys.readouterr().out.count("check_feed_forward: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (ffn_no_activation, r"(?s)case 1 of 3 .*known mistake\nHint: no activation"),
        (ffn_relu_after, r"(?s)case 1 of 3 .*known mistake\nHint: the ReLU goes between"),
        (ffn_gelu, r"(?s)case 1 of 3 .*known mistake\nHint: this is GELU"),
        (ffn_transposed, r"(?s)case 1 of 3 .*your function raised RuntimeError"),
        (ffn_no_bias, r"(?s)case 1 of 3 .*known mistake\nHint: your output ignores both biases"),
        (ffn_no_b2, r"(?s)case 1 of 3 .*known mistake\nHint: your output ignores b2"),
        (ffn_b1_after_relu, r"(?s)case 1 of 3 .*known mistake\nHint: you added b1 after the ReLU"),
        (ffn_sigmoid, r"(?s)case 1 of 3 .*known mistake\nHint: this is a sigmoid"),
        (ffn_tanh_gelu, r"(?s)case 1 of 3 .*known mistake\nHint: this is GELU.*tanh approximation"),
        (ffn_on_meta, r"(?s)case 1 of 3 .*meta device, which holds no values.*\nHint: the inputs are CPU"),
    ],
)
def test_wrong_feed_forward_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_feed_forward(bad)


# ---- LayerNorm ------------------------------------------------------------------------------


def good_ln(x, gamma, beta, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def good_ln_functional(x, gamma, beta, eps):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def ln_unbiased(x, gamma, beta, eps):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * gamma + beta


def ln_eps_outside(x, gamma, beta, eps):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (x.std(-1, correction=0, keepdim=True) + eps) * gamma + beta


def ln_no_affine(x, gamma, beta, eps):
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def ln_no_eps(x, gamma, beta, eps):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps=0.0)


def ln_batch_dim(x, gamma, beta, eps):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, correction=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def ln_naive_variance(x, gamma, beta, eps):  # E[x^2] - E[x]^2 in float32
    x32 = x.float()
    mean = x32.mean(-1, keepdim=True)
    var = (x32**2).mean(-1, keepdim=True) - mean**2
    return ((x32 - mean) / torch.sqrt(var.clamp_min(0) + eps) * gamma.float() + beta.float()).double()


def ln_naive_variance_float64(x, gamma, beta, eps):  # E[x^2] - E[x]^2, no cast
    mean = x.mean(-1, keepdim=True)
    var = (x**2).mean(-1, keepdim=True) - mean**2
    return (x - mean) / torch.sqrt(var.clamp_min(0) + eps) * gamma + beta


def ln_swapped(x, gamma, beta, eps):
    return F.layer_norm(x, x.shape[-1:], beta, gamma, eps)


def ln_rms(x, gamma, beta, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gamma + beta


def ln_two_dims(x, gamma, beta, eps):
    mean = x.mean((-2, -1), keepdim=True)
    var = x.var((-2, -1), keepdim=True, correction=0)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def ln_std_eps_outside(x, gamma, beta, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * gamma + beta


def ln_wrong_scale(x, gamma, beta, eps):  # gamma applied twice: no named mistake
    return good_ln(x, gamma, beta, eps) * gamma


def test_correct_layer_norm_passes(capsys):
    exercises.check_layer_norm(good_ln)
    exercises.check_layer_norm(good_ln_functional)
    assert capsys.readouterr().out.count("check_layer_norm: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (ln_unbiased, r"(?s)case 1 of 3 .*known mistake\nHint: you used the unbiased variance"),
        (ln_eps_outside, r"(?s)known mistake\nHint: eps goes inside the square root"),
        (ln_no_affine, r"(?s)case 1 of 3 .*known mistake\nHint: you normalised but did not scale"),
        (ln_no_eps, r"(?s)known mistake\nHint: you left out eps"),
        (ln_batch_dim, r"(?s)case 1 of 3 .*known mistake\nHint: you normalised over the batch"),
        (ln_naive_variance, r"(?s)case 2 of 3 .*values differ.*Hint: subtract the mean"),
        (ln_naive_variance_float64, r"(?s)case 2 of 3 .*values differ.*Hint: subtract the mean"),
        (ln_swapped, r"(?s)case 1 of 3 .*known mistake\nHint: gamma and beta are swapped"),
        (ln_rms, r"(?s)case 1 of 3 .*known mistake\nHint: you did not subtract the mean"),
        (ln_two_dims, r"(?s)case 1 of 3 .*known mistake\nHint: you normalised over the last two"),
        (ln_std_eps_outside, r"(?s)case 1 of 3 .*known mistake\nHint: two mistakes"),
        (ln_wrong_scale, r"(?s)case 1 of 3 .*values differ.*\nHint: over which dimension"),
    ],
)
def test_wrong_layer_norm_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_layer_norm(bad)


# ---- blocks ---------------------------------------------------------------------------------


def post_ln(x, attn, ff, norm1, norm2):
    x = norm1(x + attn(x))
    return norm2(x + ff(x))


def pre_ln(x, attn, ff, norm1, norm2):
    x = x + attn(norm1(x))
    return x + ff(norm2(x))


def pre_ln_variant(x, attn, ff, norm1, norm2):  # correct: the same sum, written differently
    h = attn(norm1(x)) + x
    return ff(norm2(h)).add(h)


def post_no_residual(x, attn, ff, norm1, norm2):
    return norm2(ff(norm1(attn(x))))


def pre_no_residual(x, attn, ff, norm1, norm2):
    return ff(norm2(attn(norm1(x))))


def pre_norm_after(x, attn, ff, norm1, norm2):
    x = x + norm1(attn(x))
    return x + norm2(ff(x))


def post_swapped(x, attn, ff, norm1, norm2):
    return post_ln(x, attn, ff, norm2, norm1)


def pre_swapped(x, attn, ff, norm1, norm2):
    return pre_ln(x, attn, ff, norm2, norm1)


def pre_ffn_first(x, attn, ff, norm1, norm2):  # sublayers in the wrong order
    x = x + ff(norm2(x))
    return x + attn(norm1(x))


def post_tuple(x, attn, ff, norm1, norm2):  # the habit from block.self_attn(h)[0]
    x = norm1(x + attn(x)[0])
    return norm2(x + ff(x))


def pre_tuple(x, attn, ff, norm1, norm2):
    x = x + attn(norm1(x))[0]
    return x + ff(norm2(x))


def pre_residual_from_normed(x, attn, ff, norm1, norm2):  # the classic one (review probe p6)
    h = norm1(x)
    x = h + attn(h)
    h = norm2(x)
    return h + ff(h)


def pre_parallel(x, attn, ff, norm1, norm2):
    return x + attn(norm1(x)) + ff(norm2(x))


def pre_one_norm_at_end(x, attn, ff, norm1, norm2):
    x = x + attn(norm1(x))
    return norm2(x + ff(x))


def test_correct_blocks_pass(capsys):
    exercises.check_post_ln_block(post_ln)
    exercises.check_pre_ln_block(pre_ln)
    exercises.check_pre_ln_block(pre_ln_variant)
    out = capsys.readouterr().out
    assert out.count("check_post_ln_block: all 3 cases passed.") == 1
    assert out.count("check_pre_ln_block: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (pre_ln, r"(?s)case 1 of 3 .*known mistake\nHint: this is the Pre-LN wiring"),
        (post_no_residual, r"(?s)known mistake\nHint: there is no residual connection"),
        (post_swapped, r"(?s)known mistake\nHint: norm1 belongs to the attention"),
        (post_tuple, r"(?s)case 1 of 3 .*known mistake\nHint: attn here is a plain function.*returns a pair"),
        (pre_one_norm_at_end, r"(?s)case 1 of 3 .*values differ.*\nHint: follow the Post-LN equation"),
    ],
)
def test_wrong_post_ln_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_post_ln_block(bad)


@pytest.mark.parametrize(
    "bad, match",
    [
        (post_ln, r"(?s)case 1 of 3 .*known mistake\nHint: this is the Post-LN wiring"),
        (pre_no_residual, r"(?s)known mistake\nHint: there is no residual connection"),
        (pre_norm_after, r"(?s)known mistake\nHint: you normalised the sublayer's output"),
        (pre_swapped, r"(?s)known mistake\nHint: norm1 belongs to the attention"),
        (pre_ffn_first, r"(?s)case 1 of 3 .*values differ from the reference.*Hint: follow the Pre-LN"),
        (pre_tuple, r"(?s)case 1 of 3 .*known mistake\nHint: attn here is a plain function"),
        (pre_residual_from_normed, r"(?s)case 1 of 3 .*known mistake\nHint: your residual adds the normalised input"),
        (pre_parallel, r"(?s)case 1 of 3 .*known mistake\nHint: this is the parallel block"),
        (pre_one_norm_at_end, r"(?s)case 1 of 3 .*values differ.*\nHint: follow the Pre-LN equation"),
    ],
)
def test_wrong_pre_ln_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_pre_ln_block(bad)


# ---- SwiGLU at the ReLU FFN's weight count -------------------------------------------------


def swiglu_width(d_model, d_ff):
    if (2 * d_ff) % 3:
        raise ValueError(f"no integer width: 2 * {d_ff} / 3 is not an integer")
    return 2 * d_ff // 3


def swiglu_width_by_count(d_model, d_ff):  # a correct variant: solve 3 d h = 2 d d_ff
    h, rest = divmod(2 * d_model * d_ff, 3 * d_model)
    if rest:
        raise ValueError("no exact match")
    return h


def width_float(d_model, d_ff):
    return 2 * d_ff / 3


def width_inverted(d_model, d_ff):
    return 3 * d_ff // 2


def width_unchanged(d_model, d_ff):
    return d_ff


def width_shazeer(d_model, d_ff):  # 8/3 d: right only when d_ff = 4 d
    return 8 * d_model // 3


def width_truncated(d_model, d_ff):  # no ValueError where no width matches
    return int(2 / 3 * d_ff)


def width_always_raises(d_model, d_ff):
    raise ValueError("SwiGLU cannot match")


def test_correct_swiglu_width_passes(capsys):
    exercises.check_swiglu_width(swiglu_width)
    exercises.check_swiglu_width(swiglu_width_by_count)
    assert capsys.readouterr().out.count("check_swiglu_width: all 4 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (width_float, r"(?s)case 1 of 4 .*expected an int, got float 64.0.*Hint: a width counts hidden units"),
        (width_inverted, r"(?s)case 1 of 4 .*your width 144 gives .* 6912 weights; the ReLU FFN has .* 3072"
                         r".*Hint: you inverted the ratio"),
        (width_unchanged, r"(?s)case 1 of 4 .*Hint: at the ReLU FFN's own width SwiGLU has 1.5 times"),
        (width_shazeer, r"(?s)case 1 of 4 \(d_model 16, d_ff 96\).*your width 42 .*Hint: 8/3 \* d_model is the matched width only"),
        (width_truncated, r"(?s)case 4 of 4 .*your width 42 .* 2016 weights.*2048.*Hint: no integer width matches"),
        (width_always_raises, r"(?s)case 1 of 4 .*raised ValueError.*Hint: a SwiGLU width .* exists here"),
    ],
)  # fmt: skip
def test_wrong_swiglu_width_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_swiglu_width(bad)


def good_swiglu(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def good_swiglu_by_hand(x, w_gate, w_up, w_down):  # a correct variant: z * sigmoid(z), einsum
    z = torch.einsum("...d,dh->...h", x, w_gate)
    return torch.einsum("...h,hd->...d", z * torch.sigmoid(z) * (x @ w_up), w_down)


def swiglu_swapped(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_up) * (x @ w_gate)) @ w_down


def swiglu_sigmoid(x, w_gate, w_up, w_down):
    return (torch.sigmoid(x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_relu(x, w_gate, w_up, w_down):
    return (torch.relu(x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_after_product(x, w_gate, w_up, w_down):
    return F.silu((x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_no_up(x, w_gate, w_up, w_down):
    return F.silu(x @ w_gate) @ w_down


def swiglu_exp_overflow(x, w_gate, w_up, w_down):  # SiLU as z e^z / (1 + e^z): inf / inf
    z = x @ w_gate
    return (z * torch.exp(z) / (1 + torch.exp(z)) * (x @ w_up)) @ w_down


def swiglu_float32(x, w_gate, w_up, w_down):
    return good_swiglu(x.float(), w_gate.float(), w_up.float(), w_down.float())


def swiglu_transposed(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down.T


def test_correct_swiglu_ffn_passes(capsys):
    exercises.check_swiglu_ffn(good_swiglu)
    exercises.check_swiglu_ffn(good_swiglu_by_hand)
    assert capsys.readouterr().out.count("check_swiglu_ffn: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (swiglu_swapped, r"(?s)case 1 of 3 .*known mistake\nHint: the SiLU goes on the gate"),
        (swiglu_sigmoid, r"(?s)case 1 of 3 .*known mistake\nHint: this gate is a sigmoid"),
        (swiglu_relu, r"(?s)case 1 of 3 .*known mistake\nHint: this gate is a ReLU"),
        (swiglu_after_product, r"(?s)case 1 of 3 .*known mistake\nHint: the SiLU acts on the gate alone"),
        (swiglu_no_up, r"(?s)case 1 of 3 .*known mistake\nHint: your output ignores w_up"),
        (swiglu_exp_overflow, r"(?s)case 3 of 3 .*NaN or inf.*\nHint: the gate's pre-activations reach"),
        (swiglu_float32, r"(?s)case 3 of 3 .*values differ.*\nHint: the gate's pre-activations reach"),
        (swiglu_transposed, r"(?s)case 1 of 3 .*raised RuntimeError"),
    ],
)  # fmt: skip
def test_wrong_swiglu_ffn_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_swiglu_ffn(bad)


# ---- RMSNorm --------------------------------------------------------------------------------


def good_rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def good_rms_functional(x, weight, eps):  # a correct variant: the library's, or Llama's float32 upcast
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def good_rms_norm_of_vector(x, weight, eps):  # a correct variant: via the L2 norm, rescaled
    d = x.shape[-1]
    return x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + eps) * weight


def rms_centred(x, weight, eps):
    return F.layer_norm(x, x.shape[-1:], eps=eps) * weight


def rms_eps_outside(x, weight, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def rms_no_eps(x, weight, eps):
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * weight


def rms_l2(x, weight, eps):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


def rms_no_weight(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_global(x, weight, eps):  # one mean square for the whole tensor
    return x * torch.rsqrt(x.pow(2).mean() + eps) * weight


def rms_var(x, weight, eps):
    return x / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight


def rms_no_keepdim(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1) + eps) * weight


def test_correct_rms_norm_passes(capsys):
    exercises.check_rms_norm_by_hand(good_rms)
    exercises.check_rms_norm_by_hand(good_rms_functional)
    exercises.check_rms_norm_by_hand(good_rms_norm_of_vector)
    assert capsys.readouterr().out.count("check_rms_norm_by_hand: all 3 cases passed.") == 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (rms_centred, r"(?s)case 1 of 3 .*known mistake\nHint: you subtracted the mean: that is LayerNorm"),
        (rms_eps_outside, r"(?s)case 2 of 3 .*known mistake\nHint: eps goes inside the square root"),
        (rms_no_eps, r"(?s)case 2 of 3 .*known mistake\nHint: you left out eps"),
        (rms_l2, r"(?s)case 1 of 3 .*known mistake\nHint: you divided by the L2 norm"),
        (rms_no_weight, r"(?s)case 1 of 3 .*known mistake\nHint: what happened to the gain"),
        (rms_global, r"(?s)case 1 of 3 .*known mistake\nHint: you took one mean square over the whole tensor"),
        (rms_var, r"(?s)case 1 of 3 .*known mistake\nHint: x.var subtracts the mean"),
        (rms_no_keepdim, r"(?s)case 1 of 3 .*raised RuntimeError"),
    ],
)  # fmt: skip
def test_wrong_rms_norm_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_rms_norm_by_hand(bad)


def test_rms_norm_hard_case_catches_a_statistic_shared_across_rows():
    def global_when_large(x, weight, eps):  # one statistic over the batch, once values are large
        if x.abs().max() > 100:
            return rms_global(x, weight, eps)
        return good_rms(x, weight, eps)

    with pytest.raises(
        exercises.CheckFailed,
        match=r"(?s)case 3 of 3 \(x \(5, 6\) float32: row 1 all zeros .*known mistake\nHint: you took one mean square",
    ):
        exercises.check_rms_norm_by_hand(global_when_large)


# ---- the parallel block ---------------------------------------------------------------------


def parallel(x, attn, ff, norm):
    h = norm(x)
    return x + attn(h) + ff(h)


def parallel_twice_normed(x, attn, ff, norm):  # a correct variant: norm computed twice
    out = x.clone()
    out += ff(norm(x))
    out += attn(norm(x))
    return out


def parallel_sequential(x, attn, ff, norm):
    x = x + attn(norm(x))
    return x + ff(norm(x))


def parallel_normed_residual(x, attn, ff, norm):
    h = norm(x)
    return h + attn(h) + ff(h)


def parallel_tuple(x, attn, ff, norm):
    h = norm(x)
    return x + attn(h)[0] + ff(h)


def parallel_ff_raw(x, attn, ff, norm):
    return x + attn(norm(x)) + ff(x)


def parallel_two_residuals(x, attn, ff, norm):
    h = norm(x)
    return (x + attn(h)) + (x + ff(h))


def parallel_post(x, attn, ff, norm):
    return norm(x + attn(x) + ff(x))


def parallel_halved(x, attn, ff, norm):  # an average of the sublayers: no named mistake
    h = norm(x)
    return x + (attn(h) + ff(h)) / 2


def test_correct_parallel_block_passes(capsys):
    exercises.check_parallel_block(parallel)
    exercises.check_parallel_block(parallel_twice_normed)
    assert capsys.readouterr().out.count("check_parallel_block: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (parallel_sequential, r"(?s)case 1 of 3 .*known mistake\nHint: this is the sequential Pre-LN block"),
        (parallel_normed_residual, r"(?s)case 1 of 3 .*known mistake\nHint: your residual adds the normalised input"),
        (parallel_tuple, r"(?s)case 1 of 3 .*known mistake\nHint: attn here is a plain function"),
        (parallel_ff_raw, r"(?s)case 1 of 3 .*known mistake\nHint: your FFN reads the raw x"),
        (parallel_two_residuals, r"(?s)case 1 of 3 .*known mistake\nHint: you added x twice"),
        (parallel_post, r"(?s)case 1 of 3 .*known mistake\nHint: you normalised after the sum"),
        (parallel_halved, r"(?s)case 1 of 3 .*values differ.*\nHint: which tensor does each sublayer read"),
    ],
)  # fmt: skip
def test_wrong_parallel_block_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_parallel_block(bad)


# ---- devices --------------------------------------------------------------------------------


def test_a_result_on_another_device_is_reported_in_words():
    def parallel_on_meta(x, attn, ff, norm):
        return parallel(x, attn, ff, norm).to("meta")

    def rms_on_meta(x, weight, eps):
        return good_rms(x.to("meta"), weight.to("meta"), eps)

    def rms_mixed_devices(x, weight, eps):
        return good_rms(x, weight, eps) + torch.zeros(x.shape[-1], device="meta")

    meta = r"(?s)case 1 of 3 .*meta device, which holds no values to compare\nHint: the inputs are CPU"
    with pytest.raises(exercises.CheckFailed, match=meta):
        exercises.check_parallel_block(parallel_on_meta)
    with pytest.raises(exercises.CheckFailed, match=meta):
        exercises.check_rms_norm_by_hand(rms_on_meta)
    with pytest.raises(exercises.CheckFailed, match=r"(?s)case 1 of 3 .*raised RuntimeError.*meta.*\nHint: the inputs are CPU"):
        exercises.check_rms_norm_by_hand(rms_mixed_devices)


def test_hints_never_show_the_solution():
    """A mistake's hint names it; none prints a line of the reference solutions."""
    wrong = [
        (exercises.check_swiglu_ffn, swiglu_swapped),
        (exercises.check_swiglu_ffn, lambda *a: 2 * good_swiglu(*a)),
        (exercises.check_rms_norm_by_hand, rms_centred),
        (exercises.check_rms_norm_by_hand, lambda *a: 2 * good_rms(*a)),
        (exercises.check_parallel_block, parallel_sequential),
        (exercises.check_parallel_block, parallel_halved),
        (exercises.check_pre_ln_block, pre_residual_from_normed),
    ]
    for checker, bad in wrong:
        with pytest.raises(exercises.CheckFailed) as info:
            checker(bad)
        message = str(info.value)
        for solution in ("x + attn(h) + ff(h)", "F.silu(x @ w_gate)", "silu(gate) * up",
                         "x / torch.sqrt", "rsqrt", "x + attn(norm(x))"):  # fmt: skip
            assert solution not in message, message


def test_stubs_report_not_implemented():
    def stub(*args):
        raise NotImplementedError("your code here")

    for checker in (
        exercises.check_feed_forward,
        exercises.check_layer_norm,
        exercises.check_post_ln_block,
        exercises.check_pre_ln_block,
        exercises.check_swiglu_width,
        exercises.check_swiglu_ffn,
        exercises.check_rms_norm_by_hand,
        exercises.check_parallel_block,
    ):
        with pytest.raises(exercises.CheckFailed, match="raised NotImplementedError"):
            checker(stub)
