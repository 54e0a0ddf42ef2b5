"""Chapter 3's self-checks: correct solutions pass, the classic mistakes are named."""

import math

import pytest
import torch

from mtlib import exercises


def good_sdpa(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


def torch_sdpa(q, k, v, mask=None):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def no_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


def by_d_k(q, k, v, mask=None):
    return good_sdpa(q / math.sqrt(q.shape[-1]), k, v, mask)


def wrong_axis(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-2) @ v


def no_transpose(q, k, v, mask=None):
    return (q @ k / math.sqrt(q.shape[-1])).softmax(dim=-1) @ v


def flipped_mask(q, k, v, mask=None):
    return good_sdpa(q, k, v, None if mask is None else ~mask)


def ignores_mask(q, k, v, mask=None):
    return good_sdpa(q, k, v)


def k_dot_t(q, k, v, mask=None):  # k.T reverses every axis: fine unbatched, wrong with a batch
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


def by_d_v(q, k, v, mask=None):
    return good_sdpa(q * math.sqrt(q.shape[-1] / v.shape[-1]), k, v, mask)


def mask_after_softmax(q, k, v, mask=None):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    return (weights if mask is None else weights * mask) @ v


def no_softmax(q, k, v, mask=None):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) @ v


def minus_1e9(q, k, v, mask=None):  # a correct variant: a large negative number instead of -inf
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return scores.softmax(dim=-1) @ v


def naive_softmax(q, k, v, mask=None):  # exp(s) / sum exp(s): overflows once scores pass ~88
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()
    return e / e.sum(-1, keepdim=True) @ v


def stable_softmax(q, k, v, mask=None):  # a correct variant: the softmax by hand, minus the row max
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = (scores - scores.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True) @ v


def test_correct_attention_passes(capsys):
    exercises.check_scaled_dot_product_attention(good_sdpa)
    exercises.check_scaled_dot_product_attention(torch_sdpa)  # PyTorch's own is a correct variant
    exercises.check_scaled_dot_product_attention(minus_1e9)
    exercises.check_scaled_dot_product_attention(stable_softmax)
    assert capsys.readouterr().out.count("check_scaled_dot_product_attention: all 6 cases passed.") == 4


def test_the_large_score_case_overflows_a_naive_softmax():
    g = torch.Generator().manual_seed(0)
    q, k, v = exercises.ch03._large_scores(g)
    scores = q @ k.T / math.sqrt(q.shape[-1])
    assert scores.max() > 200  # far beyond float32's exp limit (~88.7)
    assert not torch.isfinite(naive_softmax(q, k, v)).all()
    assert torch.isfinite(good_sdpa(q, k, v)).all()


@pytest.mark.parametrize(
    "bad, match",
    [
        (no_scale, r"(?s)case 1 of 6 .*known mistake\nHint: your output is attention WITHOUT the scale"),
        (by_d_k, r"(?s)case 1 of 6 .*Hint: you divided by d_k"),
        (wrong_axis, r"(?s)case 1 of 6 .*Hint: your softmax normalises over the queries"),
        (no_transpose, r"(?s)case 1 of 6 .*raised RuntimeError.*\nHint: the scores are q @ k.transpose\(-2, -1\)"),
        (flipped_mask, r"(?s)case 4 of 6 .*Hint: your mask has the wrong sign"),
        (ignores_mask, r"(?s)case 4 of 6 .*values differ.*\nHint: fill the scores where the mask is False"),
        (k_dot_t, r"(?s)case 2 of 6 .*Hint: use k.transpose\(-2, -1\)"),
        (by_d_v, r"(?s)case 1 of 6 .*known mistake\nHint: you divided by sqrt\(d_v\)"),
        (mask_after_softmax, r"(?s)case 4 of 6 .*known mistake\nHint: you zeroed the masked weights AFTER the softmax"),
        (no_softmax, r"(?s)case 1 of 6 .*values differ.*\nHint: the scores are q @ k.transpose\(-2, -1\) / sqrt\(d_k\)"),
        (naive_softmax, r"(?s)case 3 of 6 .*NaN or inf.*\nHint: exp\(\) of a score above about 88 overflows"),
    ],
)
@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_attention_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_scaled_dot_product_attention(bad)


def good_layer(x, w_q, w_k, w_v, w_o):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return good_sdpa(q, k, v) @ w_o


def test_correct_layer_passes(capsys):
    exercises.check_self_attention_layer(good_layer)
    assert capsys.readouterr().out.strip() == "check_self_attention_layer: all 3 cases passed."


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda x, w_q, w_k, w_v, w_o: good_sdpa(x @ w_q, x @ w_k, x @ w_v), r"(?s)case 1 of 3 .*got \(5, 3\)\nHint: .*multiply by w_o"),
        (lambda x, w_q, w_k, w_v, w_o: good_sdpa(x @ w_q.T, x @ w_k.T, x @ w_v.T) @ w_o.T, r"(?s)case 1 of 3 .*raised RuntimeError"),
        (
            lambda x, w_q, w_k, w_v, w_o: no_scale(x @ w_q / math.sqrt(x.shape[-1]), x @ w_k, x @ w_v) @ w_o,
            r"(?s)case 1 of 3 .*Hint: you scaled by sqrt\(d_model\)",
        ),
        (lambda x, w_q, w_k, w_v, w_o: no_scale(x @ w_q, x @ w_k, x @ w_v) @ w_o, r"Hint: your output is attention WITHOUT the scale"),
        (
            lambda x, w_q, w_k, w_v, w_o: no_scale(x @ w_q / math.sqrt(w_v.shape[1]), x @ w_k, x @ w_v) @ w_o,
            r"(?s)case 1 of 3 .*Hint: you scaled by sqrt\(d_v\)",
        ),
    ],
)
def test_layer_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_self_attention_layer(bad)


def good_entropy(w):
    return -torch.xlogy(w, w).sum(-1)


def test_correct_entropy_passes(capsys):
    exercises.check_attention_entropy(good_entropy)
    exercises.check_attention_entropy(lambda w: -(w * w.clamp_min(1e-30).log()).sum(-1))
    assert capsys.readouterr().out.count("check_attention_entropy: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda w: -(w * w.log2()).sum(-1), r"(?s)case 1 of 3 .*Hint: you used log base 2"),
        (lambda w: (w * w.log()).sum(-1), r"(?s)case 1 of 3 .*Hint: your entropy is negative"),
        (lambda w: -(w * w.log()).sum(-1), r"(?s)case 3 of 3 .*NaN.*\nHint: 0 \* log\(0\) is NaN"),
        (lambda w: -(w * w.log()).sum(-2), r"(?s)case 1 of 3 .*expected output shape \(2,\), got \(4,\)"),
    ],
)
def test_entropy_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_attention_entropy(bad)


def test_checkers_do_not_reveal_the_answer_for_a_stub():
    def stub(*args, **kwargs):
        raise NotImplementedError("your code here")

    with pytest.raises(exercises.CheckFailed, match=r"raised NotImplementedError: your code here"):
        exercises.check_scaled_dot_product_attention(stub)
