"""Chapter 12's self-checks: correct answers pass, the typical wrong ones are named."""

import re

import pytest
import torch

from mtlib import exercises

# ---- online softmax -------------------------------------------------------------------------


def good_merge(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b)
    ref = torch.where(m == float("-inf"), 0.0, m)  # no key in either block: avoid -inf - -inf
    a, b = torch.exp(m_a - ref), torch.exp(m_b - ref)
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b


def good_merge_logsumexp(m_a, l_a, acc_a, m_b, l_b, acc_b):  # a variant: stack and reduce
    ms = torch.stack([m_a, m_b])  # (2, ..., 1)
    m = ms.amax(dim=0)
    w = torch.exp(ms - m.nan_to_num(neginf=0.0))  # (2, ..., 1)
    return m, (w * torch.stack([l_a, l_b])).sum(0), (w * torch.stack([acc_a, acc_b])).sum(0)


def naive_merge(m_a, l_a, acc_a, m_b, l_b, acc_b):  # right, except where both blocks are empty
    m = torch.maximum(m_a, m_b)
    a, b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b


def max_over_rows(m_a, l_a, acc_a, m_b, l_b, acc_b):  # one maximum for every row: m is wrong
    m = torch.maximum(m_a, m_b).amax(dim=tuple(range(m_a.dim())), keepdim=True).expand_as(m_a)
    a, b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b


def l_weighted_acc(m_a, l_a, acc_a, m_b, l_b, acc_b):  # accs weighted by l, as if averages
    m, length, _ = good_merge(m_a, l_a, acc_a, m_b, l_b, acc_b)
    ref = torch.where(m == float("-inf"), 0.0, m)
    a, b = l_a * torch.exp(m_a - ref), l_b * torch.exp(m_b - ref)
    return m, length, acc_a * a + acc_b * b


def no_rescale(m_a, l_a, acc_a, m_b, l_b, acc_b):
    return torch.maximum(m_a, m_b), l_a + l_b, acc_a + acc_b


def flipped(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b)
    a, b = torch.exp(m - m_a), torch.exp(m - m_b)
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b


def acc_only(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b)
    return m, l_a + l_b, acc_a * torch.exp(m_a - m) + acc_b * torch.exp(m_b - m)


def last_max(m_a, l_a, acc_a, m_b, l_b, acc_b):
    a = torch.exp(m_a - m_b)
    return m_b, l_a * a + l_b, acc_a * a + acc_b


def first_only(m_a, l_a, acc_a, m_b, l_b, acc_b):  # assumes block b brings the new maximum
    m = torch.maximum(m_a, m_b)
    a = torch.exp(m_a - m)
    return m, l_a * a + l_b, acc_a * a + acc_b


def normalised(m_a, l_a, acc_a, m_b, l_b, acc_b):  # returns acc / l instead of the state
    m, length, acc = good_merge(m_a, l_a, acc_a, m_b, l_b, acc_b)
    return m, length, acc / length


def test_online_softmax_correct_answers_pass(capsys):
    exercises.check_online_softmax(good_merge)
    exercises.check_online_softmax(good_merge_logsumexp)
    assert capsys.readouterr().out.count("check_online_softmax: all 5 cases passed.") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (no_rescale, "rescale each block by exp(m_block - m)"),
        (flipped, "not exp(m - m_block)"),
        (acc_only, "l needs the same rescale as acc"),
        (last_max, "m must be the larger of the two maxima"),
        (first_only, "rescale the second block too"),
        (normalised, "your acc is off"),
        (
            naive_merge,
            "case 5 of 5 (row 1 saw no key in either block (m = -inf in both)): your l is NaN",
        ),
        (naive_merge, "-inf - (-inf) is NaN"),
        (max_over_rows, "your m is off"),
        (max_over_rows, "the larger of m_a and m_b, row by row"),
        (l_weighted_acc, "your acc is off"),
        (lambda *s: s[0], "return a tuple of three tensors"),
    ],
)
def test_online_softmax_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_online_softmax(wrong)


def test_online_softmax_merge_gives_the_exact_softmax():
    """The merged state's acc / l is softmax(scores) @ values over both blocks (the point)."""
    gen = torch.Generator().manual_seed(3)
    scores, values = (
        torch.randn(4, 9, generator=gen, dtype=torch.float64),
        torch.randn(9, 5, generator=gen, dtype=torch.float64),
    )

    def state(s, v):
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - m)
        return m, p.sum(-1, keepdim=True), p @ v

    m, length, acc = good_merge(
        *state(scores[:, :4], values[:4]), *state(scores[:, 4:], values[4:])
    )
    torch.testing.assert_close(acc / length, torch.softmax(scores, -1) @ values)


# ---- KV cache append ------------------------------------------------------------------------


def good_append(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], 2 * end, buffer.shape[3])
        bigger[:, :, :length] = buffer[:, :, :length]
        buffer = bigger
    buffer[:, :, length:end] = new
    return buffer


def append_default_dtype(buffer, length, new):  # torch.empty without dtype= / device=
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = torch.empty(*buffer.shape[:2], 2 * end, buffer.shape[3])  # float32, on the CPU
        bigger[:, :, :length] = buffer[:, :, :length]
        buffer = bigger
    buffer[:, :, length:end] = new
    return buffer


def append_grows_when_full(buffer, length, new):  # off by one: grows when exactly full
    end = length + new.shape[2]
    if end >= buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], 2 * end, buffer.shape[3])
        bigger[:, :, :length] = buffer[:, :, :length]
        buffer = bigger
    buffer[:, :, length:end] = new
    return buffer


def good_append_doubling(buffer, length, new):  # a variant: double the capacity until it fits
    end, capacity = length + new.shape[2], buffer.shape[2]
    if end > capacity:
        while capacity < end:
            capacity *= 2
        buffer = torch.cat(
            [
                buffer[:, :, :length],
                buffer.new_zeros(*buffer.shape[:2], capacity - length, buffer.shape[3]),
            ],
            dim=2,
        )
    buffer[:, :, length:end].copy_(new)
    return buffer


def append_by_cat(buffer, length, new):
    return torch.cat([buffer[:, :, :length], new], dim=2)


def append_fixed_growth(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], buffer.shape[2] + 16, buffer.shape[3])
        bigger[:, :, :length] = buffer[:, :, :length]
        buffer = bigger
    buffer[:, :, length:end] = new
    return buffer


def append_no_copy(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        buffer = buffer.new_zeros(*buffer.shape[:2], 2 * end, buffer.shape[3])
    buffer[:, :, length:end] = new
    return buffer


def append_returns_view(buffer, length, new):  # returns the filled part: no room left next time
    return good_append(buffer, length, new)[:, :, : length + new.shape[2]]


def append_one_late(buffer, length, new):
    return good_append(buffer, length + 1, new)


def test_kv_cache_append_correct_answers_pass(capsys):
    exercises.check_kv_cache_append(good_append)
    exercises.check_kv_cache_append(good_append_doubling)
    out = capsys.readouterr().out
    assert out.count("check_kv_cache_append: all 91 cases (generation steps) passed") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (append_by_cat, "a new buffer was allocated although the old one had room"),
        (append_fixed_growth, "grow geometrically"),
        (append_no_copy, "copy the old positions into it first"),
        (append_one_late, "the new keys are not at positions [length, length + T_new)"),
        (append_returns_view, "return the whole buffer, not its filled part"),
        (append_default_dtype, "the buffer you returned is torch.float32 on cpu"),
        (append_default_dtype, "allocate the bigger buffer like the old one"),
        (
            append_grows_when_full,
            "step 2 of 91 (length 3, appending 1): a new buffer was allocated",
        ),
        (append_grows_when_full, "(it was exactly full)"),
        (lambda b, n, x: x.tolist(), "expected the buffer (a torch.Tensor)"),
    ],
)
def test_kv_cache_append_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_kv_cache_append(wrong)


def test_kv_cache_append_reports_a_raise_with_the_learners_line():
    def broken(buffer, length, new):
        raise RuntimeError("oops")

    with pytest.raises(exercises.CheckFailed, match=r"step 1 of 91 .*raised RuntimeError: oops"):
        exercises.check_kv_cache_append(broken)
