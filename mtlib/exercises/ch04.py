"""Chapter 4, multi-head attention: splitting into heads, merging them back, masking heads.

Every case has distinct sizes (batch != length != d_head != heads), so that a ``view`` without
the ``transpose`` (which keeps the shape but mixes positions and heads) gives wrong values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mtlib.exercises._core import _Case, _check

__all__ = ["check_head_mask", "check_merge_heads", "check_split_heads"]

# (B, T, h, d_head): all different, and no two products accidentally equal.
_SIZES = [(2, 5, 3, 4), (3, 7, 2, 6), (1, 4, 5, 2)]


def _split_reference(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, length, d_model = x.shape
    return (
        x.double().view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)
    )  # (B, h, T, Dh)


def check_split_heads(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, num_heads)``: ``(B, T, d_model)`` -> ``(B, h, T, d_head)``.

    Head ``i`` gets the features ``i * d_head`` to ``(i + 1) * d_head`` of every token, with
    ``d_head = d_model / num_heads``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(4)
    cases = [
        _Case(
            f"B={b}, T={t}, h={h}, d_head={dh} (d_model={h * dh})",
            (torch.randn(b, t, h * dh, generator=g), h),
            hint="view as (B, T, h, d_head) first, then swap the T and h axes; "
            "a view straight to (B, h, T, d_head) has the right shape but mixes tokens, "
            "and head 0 must get the first d_head features",
        )
        for b, t, h, dh in _SIZES
    ]
    _check("check_split_heads", fn, cases, _split_reference)


def _merge_reference(x: torch.Tensor) -> torch.Tensor:
    batch, heads, length, d_head = x.shape
    return x.double().transpose(1, 2).reshape(batch, length, heads * d_head)  # (B, T, h * Dh)


def check_merge_heads(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x)``: ``(B, h, T, d_head)`` -> ``(B, T, h * d_head)``, the inverse of the split.

    Token ``t`` of the result is the concatenation of the ``h`` head outputs for token ``t``,
    head 0 first.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(5)
    cases = [
        _Case(
            f"B={b}, h={h}, T={t}, d_head={dh}",
            (torch.randn(b, h, t, dh, generator=g),),
            hint="swap the h and T axes back (transpose) before the reshape, if you have not: "
            "a reshape alone concatenates tokens instead of heads; if you did, check the order "
            "of the slices in each token: head 0 comes first, then head 1, and so on",
        )
        for b, t, h, dh in _SIZES
    ]
    _check("check_merge_heads", fn, cases, _merge_reference)


def _head_mask_reference(x: torch.Tensor, head_mask: torch.Tensor) -> torch.Tensor:
    batch, length, d_model = x.shape
    heads = head_mask.shape[0]
    x = x.double().view(batch, length, heads, d_model // heads)  # (B, T, h, Dh)
    return (x * head_mask.double()[:, None]).view(batch, length, d_model)  # (B, T, d_model)


def check_head_mask(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, head_mask)``: scale each head's slice of the merged heads by its mask entry.

    ``x`` of shape ``(B, T, d_model)`` is the input of the output projection (the concatenated
    heads); ``head_mask`` of shape ``(h,)`` holds one factor per head (0 removes the head, 1 keeps
    it). The result has the shape of ``x``; features ``i * d_head`` to ``(i + 1) * d_head`` are
    multiplied by ``head_mask[i]``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(6)
    cases = [
        _Case(
            "h=3 heads of d_head=4, remove head 0",
            (torch.randn(2, 5, 12, generator=g), torch.tensor([0.0, 1.0, 1.0])),
            hint="head i owns a contiguous block of d_head features, not every h-th feature: "
            "features i * d_head to (i + 1) * d_head - 1, multiplied by head_mask[i] itself",
        ),
        _Case(
            "h=4 heads of d_head=2, keep only head 3",
            (torch.randn(3, 7, 8, generator=g), torch.tensor([0.0, 0.0, 0.0, 1.0])),
            hint="only head 3's block (the last d_head features of every token) may survive "
            "here; look at which features of your result are zero and which are not",
        ),
        _Case(
            "h=2 heads of d_head=5, factors 0.5 and 2",
            (torch.randn(1, 3, 10, generator=g), torch.tensor([0.5, 2.0])),
            hint="multiply by the factor itself, not by (factor > 0)",
        ),
    ]
    _check("check_head_mask", fn, cases, _head_mask_reference)
