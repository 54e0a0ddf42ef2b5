"""Chapter 10's self-checks: correct answers pass, the typical wrong ones are named."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises
from tests.solutions import ch10 as solutions

# ---- top-k ----------------------------------------------------------------------------------


def good_top_k(logits, k):
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return torch.softmax(logits.masked_fill(logits < kth, float("-inf")), dim=-1)


def good_top_k_sorted(logits, k):  # a correct variant: sort, zero the tail, renormalise
    probs = torch.softmax(logits, dim=-1)
    values, order = probs.sort(dim=-1, descending=True)
    values[..., k:] = 0.0
    kept = torch.zeros_like(probs).scatter(-1, order, values)
    return kept / kept.sum(dim=-1, keepdim=True)


def top_k_unnormalised(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]
    return torch.softmax(logits, dim=-1) * (logits >= kth)


def top_k_off_by_one(logits, k):
    return good_top_k(logits, k + 1)


def _smallest(logits, k):
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1, largest=False).values[..., -1:]
    return torch.softmax(logits.masked_fill(logits > kth, float("-inf")), dim=-1)


def good_top_k_threshold(logits, k):  # a correct variant: zero the probabilities, renormalise
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]
    probs = torch.softmax(logits, dim=-1) * (logits >= kth)
    return probs / probs.sum(dim=-1, keepdim=True)


def good_top_k_scatter(logits, k):  # a correct variant: sort, cut, softmax, scatter back
    values, order = logits.sort(dim=-1, descending=True)
    values = values.clone()
    values[..., k:] = float("-inf")
    return torch.zeros_like(logits).scatter(-1, order, torch.softmax(values, dim=-1))


def good_top_k_float32(logits, k):  # a correct variant computed in float32
    return good_top_k(logits.float(), k)


def top_k_logits(logits, k):  # returns the filtered logits, not probabilities
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_naive_exp(logits, k):  # exp without subtracting the maximum: overflows near 1000
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]
    e = logits.exp().masked_fill(logits < kth, 0.0)
    return e / e.sum(dim=-1, keepdim=True)


def test_top_k_correct_answers_pass(capsys):
    for good in (good_top_k, good_top_k_sorted, good_top_k_threshold, good_top_k_scatter, good_top_k_float32):
        exercises.check_top_k_probs(good)
    assert capsys.readouterr().out.count("check_top_k_probs: all 5 cases passed.") == 5


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (top_k_unnormalised, "must sum to 1"),
        (top_k_off_by_one, "keeps k + 1 tokens"),
        (_smallest, "keeps the k smallest"),
        (top_k_logits, "case 1 of 5 (one row of 7 logits, k = 3): your output equals a known mistake\nHint: return probabilities, not the filtered logits"),
        (top_k_naive_exp, "case 5 of 5 (logits near 1000, k = 3): output contains NaN"),
        (top_k_naive_exp, "exp(1000) overflows to inf"),
        (lambda x, k: torch.softmax(x, dim=-1), "values differ"),
    ],
)
def test_top_k_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_top_k_probs(wrong)


# ---- min-p ----------------------------------------------------------------------------------


def good_min_p(logits, p_min):  # the log-space threshold: logit >= max logit + log(p_min)
    threshold = logits.amax(dim=-1, keepdim=True) + math.log(p_min)
    return torch.softmax(logits.masked_fill(logits < threshold, float("-inf")), dim=-1)


def good_min_p_probs(logits, p_min):  # a correct variant: threshold the probabilities, renormalise
    probs = torch.softmax(logits, dim=-1)
    kept = probs * (probs >= p_min * probs.amax(dim=-1, keepdim=True))
    return kept / kept.sum(dim=-1, keepdim=True)


def good_min_p_float32(logits, p_min):
    return good_min_p_probs(logits.float(), p_min)


def _min_p(logits, keep):
    return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)


def min_p_strict(logits, p_min):
    probs = torch.softmax(logits, dim=-1)
    return _min_p(logits, probs > p_min * probs.amax(dim=-1, keepdim=True))


def min_p_absolute(logits, p_min):
    return _min_p(logits, torch.softmax(logits, dim=-1) >= p_min)


def min_p_on_logits(logits, p_min):
    return _min_p(logits, logits >= p_min * logits.amax(dim=-1, keepdim=True))


def min_p_sign(logits, p_min):
    return _min_p(logits, logits >= logits.amax(dim=-1, keepdim=True) - math.log(p_min))


def min_p_unnormalised(logits, p_min):
    probs = torch.softmax(logits, dim=-1)
    return probs * (probs >= p_min * probs.amax(dim=-1, keepdim=True))


def min_p_logits(logits, p_min):
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill(probs < p_min * probs.amax(dim=-1, keepdim=True), float("-inf"))


def min_p_naive_exp(logits, p_min):
    e = logits.exp()
    probs = e / e.sum(dim=-1, keepdim=True)
    kept = probs * (probs >= p_min * probs.amax(dim=-1, keepdim=True))
    return kept / kept.sum(dim=-1, keepdim=True)


def test_min_p_correct_answers_pass(capsys):
    for good in (good_min_p, good_min_p_probs, good_min_p_float32, solutions.min_p_probs):
        exercises.check_min_p_probs(good)
    assert capsys.readouterr().out.count("check_min_p_probs: all 5 cases passed.") == 4


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (min_p_strict, "case 3 of 5 (p_min = 1.0 (only the most likely token)): your output equals a known mistake\nHint: the most likely token is always kept: compare with >=, not >"),
        (min_p_absolute, "case 1 of 5 (one row of 8 logits, p_min = 0.1): your output equals a known mistake\nHint: the threshold is relative"),
        (min_p_on_logits, "Hint: the threshold is on probabilities"),
        (min_p_sign, "Hint: log(p_min) is negative"),
        (min_p_unnormalised, "Hint: renormalise the kept probabilities"),
        (min_p_logits, "Hint: return probabilities, not the filtered logits"),
        (min_p_naive_exp, "case 5 of 5 (logits near 1000, p_min = 0.1): output contains NaN"),
        (min_p_naive_exp, "exp(1000) overflows to inf"),
        (lambda x, p: torch.softmax(x, dim=-1), "values differ"),
    ],
)
def test_min_p_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_min_p_probs(wrong)


# ---- the language-model loss ----------------------------------------------------------------


def good_loss(logits, idx):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))


def good_loss_transposed(logits, idx):  # a correct variant: cross_entropy on (B, V, T)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), idx[:, 1:])


def no_shift(logits, idx):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), idx.reshape(-1))


def wrong_way(logits, idx):
    return F.cross_entropy(logits[:, 1:].reshape(-1, logits.shape[-1]), idx[:, :-1].reshape(-1))


def summed(logits, idx):
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1), reduction="sum"
    )


def good_loss_gather(logits, idx):  # a correct variant: log_softmax and gather
    logp = logits[:, :-1].log_softmax(dim=-1)
    return -logp.gather(-1, idx[:, 1:, None]).mean()


def good_loss_ignore_index(logits, idx):  # a correct variant: every position, the last ignored
    targets = torch.cat([idx[:, 1:], torch.full_like(idx[:, :1], -100)], dim=1)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def good_loss_float32(logits, idx):
    return good_loss(logits.float(), idx)


def loss_over_b_t(logits, idx):
    return summed(logits, idx) / idx.numel()


def loss_nll_of_probs(logits, idx):
    return F.nll_loss(logits[:, :-1].softmax(-1).reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))


def loss_nll_of_logits(logits, idx):
    return F.nll_loss(logits[:, :-1].reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))


def loss_smoothed(logits, idx):
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1), label_smoothing=0.1
    )


def loss_softmax_log(logits, idx):  # log of the softmax: log(0) = -inf near 1000
    logp = logits[:, :-1].softmax(dim=-1).log()
    return -logp.gather(-1, idx[:, 1:, None]).mean()


def loss_naive_exp(logits, idx):  # exp / sum: inf / inf near 1000
    e = logits[:, :-1].exp()
    probs = e / e.sum(dim=-1, keepdim=True)
    return -probs.gather(-1, idx[:, 1:, None]).log().mean()


def test_loss_correct_answers_pass(capsys):
    goods = (good_loss, good_loss_transposed, good_loss_gather, good_loss_ignore_index, good_loss_float32)
    for good in goods:
        exercises.check_causal_lm_loss(good)
    assert capsys.readouterr().out.count("check_causal_lm_loss: all 4 cases passed.") == len(goods)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (no_shift, "no shift"),
        (wrong_way, "shifted the wrong way"),
        (summed, "not the sum"),
        (loss_over_b_t, "case 1 of 4 (B = 2, T = 6, V = 9): your output equals a known mistake\nHint: divide by the number of scored positions, B * (T - 1)"),
        (loss_nll_of_probs, "Hint: F.nll_loss expects log-probabilities: take log_softmax"),
        (loss_nll_of_logits, "Hint: F.nll_loss expects log-probabilities, not logits"),
        (loss_smoothed, "Hint: no label smoothing here"),
        (loss_softmax_log, "case 4 of 4 (logits near 1000, B = 1, T = 4, V = 6): output contains NaN or inf"),
        (loss_softmax_log, "use F.log_softmax or F.cross_entropy"),
        (loss_naive_exp, "case 4 of 4 (logits near 1000, B = 1, T = 4, V = 6): output contains NaN or inf"),
        (lambda x, i: good_loss(x, i).reshape(1), "expected output shape"),
    ],
)
def test_loss_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_causal_lm_loss(wrong)


def mean_over_all_positions(logits, idx):  # scores position t against idx[:, t] AND pads the last
    return F.cross_entropy(logits.transpose(1, 2), idx) * 0.5


def test_loss_generic_hint_does_not_give_the_answer():
    with pytest.raises(exercises.CheckFailed, match="which token should the logits") as info:
        exercises.check_causal_lm_loss(mean_over_all_positions)
    assert "idx[:, 1:]" not in str(info.value)


def test_stub_raises_without_hint():
    def stub(logits, idx):
        raise NotImplementedError

    with pytest.raises(exercises.CheckFailed, match="NotImplementedError") as info:
        exercises.check_causal_lm_loss(stub)
    assert "Hint" not in str(info.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize(
    ("checker", "good"),
    [
        (exercises.check_top_k_probs, good_top_k),
        (exercises.check_min_p_probs, good_min_p),
        (exercises.check_causal_lm_loss, good_loss),
    ],
)
def test_a_result_on_the_gpu_is_compared(checker, good, capsys):
    checker(lambda *args: good(*(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)))
    assert "passed" in capsys.readouterr().out


def min_p_strict_zeros(logits, p_min):
    probs = torch.softmax(logits, dim=-1)
    kept = probs * (probs > p_min * probs.amax(dim=-1, keepdim=True))
    return kept / kept.sum(dim=-1, keepdim=True).clamp_min(1e-30)


@pytest.mark.parametrize(
    ("checker", "wrong", "message"),
    [
        (exercises.check_min_p_probs, min_p_strict_zeros, "case 3 of 5 (p_min = 1.0 (only the most likely token)): your output equals a known mistake\nHint: the most likely token is always kept: compare with >=, not >, or a row loses every token (a row of zeros)"),
    ],
)
def test_a_row_that_lost_every_token_is_named_as_zeros_too(checker, wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        checker(wrong)
