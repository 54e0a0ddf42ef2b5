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
        (ffn_no_bias, r"(?s)case 1 of 3 .*values differ from the reference.*Hint: x @ w1 \+ b1"),
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
        (pre_ffn_first, r"(?s)case 1 of 3 .*values differ from the reference"),
    ],
)
def test_wrong_pre_ln_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_pre_ln_block(bad)


def test_stubs_report_not_implemented():
    def stub(*args):
        raise NotImplementedError("your code here")

    for checker in (
        exercises.check_feed_forward,
        exercises.check_layer_norm,
        exercises.check_post_ln_block,
        exercises.check_pre_ln_block,
    ):
        with pytest.raises(exercises.CheckFailed, match="raised NotImplementedError"):
            checker(stub)
