"""Chapter 10's self-checks: correct answers pass, the typical wrong ones are named."""

import re

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises

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


def test_top_k_correct_answers_pass(capsys):
    exercises.check_top_k_probs(good_top_k)
    exercises.check_top_k_probs(good_top_k_sorted)
    assert capsys.readouterr().out.count("check_top_k_probs: all 4 cases passed.") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (top_k_unnormalised, "must sum to 1"),
        (top_k_off_by_one, "keeps k + 1 tokens"),
        (_smallest, "keeps the k smallest"),
        (lambda x, k: torch.softmax(x, dim=-1), "values differ"),
    ],
)
def test_top_k_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_top_k_probs(wrong)


# ---- top-p ----------------------------------------------------------------------------------


def good_top_p(logits, p):
    probs = torch.softmax(logits, dim=-1)
    values, order = probs.sort(dim=-1, descending=True)
    before = values.cumsum(dim=-1) - values
    values = values.masked_fill(before >= p, 0.0)
    kept = torch.zeros_like(probs).scatter(-1, order, values)
    return kept / kept.sum(dim=-1, keepdim=True)


def good_top_p_loop(logits, p):  # a correct variant: one row at a time, a Python loop
    flat = torch.softmax(logits, dim=-1).reshape(-1, logits.shape[-1])
    out = torch.zeros_like(flat)
    for r, row in enumerate(flat):
        total = 0.0
        for i in row.argsort(descending=True).tolist():
            out[r, i] = row[i]
            total += float(row[i])
            if total >= p:
                break
        out[r] /= out[r].sum()
    return out.reshape(logits.shape)


def top_p_strict(logits, p):
    probs = torch.softmax(logits, dim=-1)
    values, order = probs.sort(dim=-1, descending=True)
    drop = values.cumsum(dim=-1) > p
    drop[..., 0] = False
    values = values.masked_fill(drop, 0.0)
    kept = torch.zeros_like(probs).scatter(-1, order, values)
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_unnormalised(logits, p):
    out = good_top_p(logits, p)
    return torch.softmax(logits, dim=-1) * (out > 0)


def top_p_ascending(logits, p):  # sorts the wrong way: keeps the least likely tokens
    probs = torch.softmax(logits, dim=-1)
    values, order = probs.sort(dim=-1)
    before = values.cumsum(dim=-1) - values
    values = values.masked_fill(before >= p, 0.0)
    kept = torch.zeros_like(probs).scatter(-1, order, values)
    return kept / kept.sum(dim=-1, keepdim=True)


def test_top_p_correct_answers_pass(capsys):
    exercises.check_top_p_probs(good_top_p)
    exercises.check_top_p_probs(good_top_p_loop)
    assert capsys.readouterr().out.count("check_top_p_probs: all 4 cases passed.") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (top_p_strict, "includes the token that makes the mass reach p"),
        (top_p_unnormalised, "renormalise"),
        (top_p_ascending, "values differ"),
    ],
)
def test_top_p_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_top_p_probs(wrong)


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


def test_loss_correct_answers_pass(capsys):
    exercises.check_causal_lm_loss(good_loss)
    exercises.check_causal_lm_loss(good_loss_transposed)
    assert capsys.readouterr().out.count("check_causal_lm_loss: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (no_shift, "no shift"),
        (wrong_way, "shifted the wrong way"),
        (summed, "not the sum"),
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
