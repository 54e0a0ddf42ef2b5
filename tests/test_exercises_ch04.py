"""Chapter 4 self-checks: correct splits, merges and head masks pass; typical mistakes are caught."""

import pytest
import torch

from mtlib import exercises


def good_split(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def good_split_einops_style(x, num_heads):  # another correct way: unflatten + permute
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)


def good_merge(x):
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)


def good_merge_cat(x):  # another correct way: concatenate the heads
    return torch.cat(x.unbind(dim=1), dim=-1)


def good_head_mask(x, head_mask):
    heads = head_mask.shape[0]
    return (x.unflatten(-1, (heads, -1)) * head_mask[:, None]).flatten(-2)


def split_reshape_permute(x, num_heads):  # another correct way
    return x.reshape(x.shape[0], x.shape[1], num_heads, -1).permute(0, 2, 1, 3)


def merge_contiguous_view(x):  # another correct way
    return x.transpose(1, 2).contiguous().view(x.shape[0], x.shape[2], -1)


def mask_repeat_interleave(x, head_mask):  # another correct way
    return x * head_mask.repeat_interleave(x.shape[-1] // head_mask.shape[0])


@pytest.mark.parametrize(
    "checker, solution, cases",
    [
        (exercises.check_split_heads, good_split, 3),
        (exercises.check_split_heads, good_split_einops_style, 3),
        (exercises.check_merge_heads, good_merge, 3),
        (exercises.check_merge_heads, good_merge_cat, 3),
        (exercises.check_head_mask, good_head_mask, 3),
        (exercises.check_split_heads, split_reshape_permute, 3),
        (exercises.check_merge_heads, merge_contiguous_view, 3),
        (exercises.check_head_mask, mask_repeat_interleave, 3),
    ],
)
def test_correct_solutions_pass_and_say_so(checker, solution, cases, capsys):
    assert checker(solution) is None
    assert capsys.readouterr().out.strip() == f"{checker.__name__}: all {cases} cases passed."


def split_view_without_transpose(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, num_heads, length, d_model // num_heads)  # right shape, tokens mixed


def split_interleaved(x, num_heads):  # every h-th feature to one head
    batch, length, d_model = x.shape
    return x.view(batch, length, d_model // num_heads, num_heads).permute(0, 3, 1, 2)


def split_no_transpose(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads)  # (B, T, h, Dh)


def merge_reshape_without_transpose(x):
    batch, heads, length, d_head = x.shape
    return x.reshape(batch, length, heads * d_head)


def merge_sum_heads(x):
    return x.sum(dim=1)


def merge_wrong_order(x):
    return x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1)  # features interleaved


def split_heads_reversed(x, num_heads):  # right shape, heads in the wrong order
    return good_split(x, num_heads).flip(1)


def merge_heads_reversed(x):  # last head first
    return torch.cat(x.flip(1).unbind(dim=1), dim=-1)


def mask_flipped(x, head_mask):  # the factors of the wrong heads
    return good_head_mask(x, head_mask.flip(0))


def mask_interleaved(x, head_mask):
    heads = head_mask.shape[0]
    return (x.unflatten(-1, (-1, heads)) * head_mask).flatten(-2)


def mask_binarised(x, head_mask):
    return good_head_mask(x, (head_mask > 0).float())


def mask_in_place(x, head_mask):
    x.unflatten(-1, (head_mask.shape[0], -1)).mul_(head_mask[:, None])
    return x


@pytest.mark.parametrize(
    "checker, bad, match",
    [
        (
            exercises.check_split_heads,
            split_view_without_transpose,
            r"case 1 of 3 .*values differ.*\nHint: view as \(B, T, h, d_head\)",
        ),
        (exercises.check_split_heads, split_interleaved, r"case 1 of 3 .*values differ"),
        (
            exercises.check_split_heads,
            split_no_transpose,
            r"case 1 of 3 .*expected output shape \(2, 3, 5, 4\), got \(2, 5, 3, 4\)",
        ),
        (
            exercises.check_merge_heads,
            merge_reshape_without_transpose,
            r"case 1 of 3 .*values differ.*\nHint: swap the h and T axes",
        ),
        (
            exercises.check_merge_heads,
            merge_sum_heads,
            r"case 1 of 3 .*expected output shape \(2, 5, 12\), got \(2, 5, 4\)",
        ),
        (exercises.check_merge_heads, merge_wrong_order, r"case 1 of 3 .*values differ"),
        (
            exercises.check_split_heads,
            split_heads_reversed,
            r"(?s)case 1 of 3 .*head 0 must get the first",
        ),
        (
            exercises.check_merge_heads,
            merge_heads_reversed,
            r"(?s)case 1 of 3 .*head 0 comes first",
        ),
        (
            exercises.check_head_mask,
            mask_flipped,
            r"(?s)case 1 of 3 .*multiplied by head_mask\[i\]",
        ),
        (
            exercises.check_head_mask,
            mask_interleaved,
            r"case 1 of 3 .*values differ.*\nHint: head i owns a contiguous block",
        ),
        (
            exercises.check_head_mask,
            mask_binarised,
            r"case 3 of 3 .*values differ.*\nHint: multiply by the factor itself",
        ),
        (
            exercises.check_head_mask,
            mask_in_place,
            r"case 1 of 3 .*changed its input tensor in place",
        ),
    ],
)
def test_typical_mistakes_are_caught_with_a_useful_message(checker, bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        checker(bad)


def test_square_sizes_would_hide_the_missing_transpose():
    # Why the checker avoids T == 1: with one token, a view without transpose is correct.
    x = torch.randn(2, 1, 12)
    assert torch.equal(split_view_without_transpose(x, 3), good_split(x, 3))
