"""Chapter 15's self-checks: correct answers pass, the typical wrong ones are named."""

import re

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises
from mtlib.models.transformer_xl import rel_shift

# ---- rel-shift ------------------------------------------------------------------------------


def shift_by_padding(x):  # the trick
    *lead, t, k = x.shape
    padded = F.pad(x, (1, 0)).reshape(*lead, k + 1, t)
    return padded[..., 1:, :].reshape(*lead, t, k)


def shift_by_gather(x):  # an explicit gather: column K - 1 - (i + M - j)
    t, k = x.shape[-2:]
    i = torch.arange(t)[:, None]
    j = torch.arange(k)[None, :]
    column = (k - 1 - (i + k - t - j)).clamp(0, k - 1)  # (T, K); junk above the diagonal
    return torch.gather(x, -1, column.expand(x.shape))


def ascending(x):  # column c read as distance c
    t, k = x.shape[-2:]
    i = torch.arange(t)[:, None]
    j = torch.arange(k)[None, :]
    return torch.gather(x, -1, (i + k - t - j).clamp(0, k - 1).expand(x.shape))


def no_memory(x):  # distance i - j
    t, k = x.shape[-2:]
    i = torch.arange(t)[:, None]
    j = torch.arange(k)[None, :]
    return torch.gather(x, -1, (k - 1 - (i - j)).clamp(0, k - 1).expand(x.shape))


def off_by_one(x):
    t, k = x.shape[-2:]
    i = torch.arange(t)[:, None]
    j = torch.arange(k)[None, :]
    return torch.gather(x, -1, (k - (i + k - t - j)).clamp(0, k - 1).expand(x.shape))


def pad_right(x):  # the zero column on the wrong side
    *lead, t, k = x.shape
    padded = F.pad(x, (0, 1)).reshape(*lead, k + 1, t)
    return padded[..., 1:, :].reshape(*lead, t, k)


def drop_last_row(x):  # the wrong row of the padded buffer dropped
    *lead, t, k = x.shape
    padded = F.pad(x, (1, 0)).reshape(*lead, k + 1, t)
    return padded[..., :-1, :].reshape(*lead, t, k)


def float32_shift(x):  # the right shift, computed in float32
    return shift_by_padding(x.float())


def test_rel_shift_correct_answers_pass(capsys):
    exercises.check_rel_shift(shift_by_padding)
    exercises.check_rel_shift(shift_by_gather)
    exercises.check_rel_shift(rel_shift)
    assert capsys.readouterr().out.count("check_rel_shift: all 3 cases passed.") == 3


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (ascending, "not distance c"),
        (no_memory, "not i - j"),
        (off_by_one, "off by one"),
        (pad_right, "the zero column goes on the LEFT"),
        (drop_last_row, "drop its FIRST row"),
        (float32_shift, "right only to float32 precision"),
        (lambda x: x, "case 1 of 3"),
        (lambda x: x[..., :-1], "expected output shape"),
    ],
)
def test_rel_shift_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_rel_shift(wrong)


# ---- memory update --------------------------------------------------------------------------


def update(mem, hidden, mem_len):
    both = torch.cat([mem, hidden], dim=1)
    return both[:, max(0, both.shape[1] - mem_len) :].detach()


def update_variant(mem, hidden, mem_len):  # detach first, narrow instead of slicing
    both = torch.cat([mem, hidden.detach()], dim=1)
    keep = min(mem_len, both.shape[1])
    return both.narrow(1, both.shape[1] - keep, keep)


def oldest(mem, hidden, mem_len):
    return torch.cat([mem, hidden], dim=1)[:, :mem_len].detach()


def minus_zero(mem, hidden, mem_len):
    return torch.cat([mem, hidden], dim=1)[:, -mem_len:].detach()


def attached(mem, hidden, mem_len):
    both = torch.cat([mem, hidden], dim=1)
    return both[:, max(0, both.shape[1] - mem_len) :]


def segment_only(mem, hidden, mem_len):
    return hidden[:, -mem_len:].detach() if mem_len else hidden[:, :0].detach()


def wrong_order(mem, hidden, mem_len):
    both = torch.cat([hidden, mem], dim=1)
    return both[:, max(0, both.shape[1] - mem_len) :].detach()


def update_under_no_grad(mem, hidden, mem_len):  # no_grad instead of detach; empty at mem_len 0
    with torch.no_grad():
        return torch.cat([mem, hidden], dim=1)[:, -mem_len:] if mem_len else hidden[:, :0]


def none_at_zero(mem, hidden, mem_len):
    return update(mem, hidden, mem_len) if mem_len else None


def detached_in_place(mem, hidden, mem_len):  # the caller's hidden leaves the graph
    both = torch.cat([mem, hidden.detach_()], dim=1)
    return both[:, max(0, both.shape[1] - mem_len) :]


def writes_into_mem(mem, hidden, mem_len):  # reuses the old buffer when the sizes match
    new = update(mem, hidden, mem_len)
    if new.shape == mem.shape:
        mem.copy_(new)
        return mem
    return new


def test_update_memory_correct_answers_pass(capsys):
    exercises.check_update_memory(update)
    exercises.check_update_memory(update_variant)
    exercises.check_update_memory(update_under_no_grad)
    assert capsys.readouterr().out.count("check_update_memory: all 5 cases passed.") == 3


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (oldest, "you kept the oldest positions"),
        (minus_zero, "x[:, -0:] is the whole tensor"),
        (attached, "still attached to the graph"),
        (segment_only, "you returned only the current segment"),
        (wrong_order, "concatenate memory first"),
        (none_at_zero, "an empty (B, 0, d) tensor, not None"),
        (detached_in_place, "took the caller's hidden out of the graph"),
        (writes_into_mem, "wrote into mem"),
        (lambda mem, hidden, mem_len: [1], "expected a torch.Tensor"),
    ],
)
def test_update_memory_mistakes_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=re.escape(message)):
        exercises.check_update_memory(wrong)


def test_a_stub_is_reported_without_a_traceback():
    def stub(mem, hidden, mem_len):
        raise NotImplementedError("your code here")

    with pytest.raises(exercises.CheckFailed, match="raised NotImplementedError: your code here$"):
        exercises.check_update_memory(stub)
    with pytest.raises(exercises.CheckFailed, match="NotImplementedError"):
        exercises.check_rel_shift(lambda x: stub(x, x, 0))


def test_the_generic_rel_shift_hint_is_not_the_solution():
    """The generic hint gave the gather formula itself (review of ch. 15): it now points at a test."""
    with pytest.raises(exercises.CheckFailed) as failure:
        exercises.check_rel_shift(lambda x: x.flip(-1))
    message = str(failure.value)
    assert "own distances" in message and "K - 1 - (i + M - j)" not in message
