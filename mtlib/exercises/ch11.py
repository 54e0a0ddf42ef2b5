"""Chapter 11, the Vision Transformer: self-checks for patches and attention rollout.

- :func:`check_unpatchify`: the inverse of cutting into patches, ``(B, N, C * p * p)`` ->
  ``(B, C, H, W)``, the patches in row-major order and each one flattened in ``(C, p, p)``
  order (the chapter's exercise 1);
- :func:`check_rollout_by_layer`: the class token's row of Abnar and Zuidema's rollout,
  ``R_l = A_l ... A_1`` with ``A_k = 0.5 * mean_heads(W_k) + 0.5 * I``, after each layer,
  ``(B, L, T)`` (the chapter's exercise 2).

The inputs are CPU tensors; a result computed on another device is moved back before the
comparison, and a device mismatch inside the learner's code gets its own hint.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from mtlib.exercises._core import CheckFailed, _call, _Case, _check, _describe, _fail
from mtlib.models.vit import attention_rollout

__all__ = [
    "check_rollout_by_layer",
    "check_unpatchify",
]

_DEVICE_HINT = ("the inputs are CPU tensors: on which device did you make your new tensor? Make it "
                "like the inputs (device=w.device, dtype=w.dtype), not on the chapter's device")  # fmt: skip


def _on_inputs_device(checker: str, run: Callable[[], None]) -> None:
    """Run a check; a device mismatch in the learner's code gets the device hint, not the case's."""
    try:
        run()
    except CheckFailed as error:
        what = str(error).partition("\nHint: ")[0]
        if not any(
            k in what for k in ("same device", "expected device", "device type", "on device")
        ):
            raise
        raise CheckFailed(f"{what}\nHint: {_DEVICE_HINT}") from None


# --------------------------------------------------------------------------------------------
# Cutting images into patches (exercise 1's tokens)
# --------------------------------------------------------------------------------------------


def _grid(images: torch.Tensor, patch: int) -> torch.Tensor:
    b, c, h, w = images.shape
    return images.reshape(b, c, h // patch, patch, w // patch, patch)  # (B, C, r, p, c, p)


def _patches(
    images: torch.Tensor, patch: int, order: tuple[int, ...] = (0, 2, 4, 1, 3, 5)
) -> torch.Tensor:
    b, c, h, w = images.shape
    n = (h // patch) * (w // patch)
    out = _grid(images, patch).permute(order).reshape(b, n, c * patch * patch)  # (B, N, C*p*p)
    return out.double()  # the checkers compare in float64


# --------------------------------------------------------------------------------------------
# Attention rollout: the pieces exercise 2's checker reuses
# --------------------------------------------------------------------------------------------


def _mean_heads(attentions: list[torch.Tensor]) -> list[torch.Tensor]:
    return [a.double().mean(1) for a in attentions]  # (B, T, T) each


def _chain(matrices: list[torch.Tensor], *, reverse: bool = False) -> torch.Tensor:
    out = matrices[0]
    for a in matrices[1:]:
        out = out @ a if reverse else a @ out
    return out


def _with_identity(attentions: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each layer's head mean mixed half and half with the identity (the residual)."""
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    return [0.5 * a + 0.5 * eye for a in _mean_heads(attentions)]


def _softmax_weights(g: torch.Generator, layers: int, b: int, h: int, t: int) -> list[torch.Tensor]:
    return [(torch.randn(b, h, t, t, generator=g) * 2).softmax(-1) for _ in range(layers)]


_ROLLOUT_HINT = ("work one case by hand: with a single layer, what should the result be, and do its "
                 "rows sum to 1? Then with two layers, which one multiplies from the left?")  # fmt: skip


def _per_head(attentions: list[torch.Tensor], alpha: float) -> torch.Tensor:
    """Rollout of every head on its own (B, H, T, T), then the mean over heads: a published
    variant, and a different number (the mean of products is not the product of means)."""
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    return _chain([(1 - alpha) * a.double() + alpha * eye for a in attentions]).mean(1)


def _head_and_layer_mistakes(alpha: float) -> dict[str, Callable[..., torch.Tensor]]:
    """Mistakes of the head average and of the first layer, with residual weight ``alpha``."""

    def eye(a: list[torch.Tensor]) -> torch.Tensor:
        return torch.eye(a[0].shape[-1], dtype=torch.float64)

    def summed(*args: Any) -> torch.Tensor:
        return _chain([(1 - alpha) * x.double().sum(1) + alpha * eye(args[0]) for x in args[0]])

    def first_raw(*args: Any) -> torch.Tensor:
        a = _mean_heads(args[0])
        return _chain([a[0]] + [(1 - alpha) * x + alpha * eye(args[0]) for x in a[1:]])

    return {
        "you rolled out every head on its own and then averaged: average the heads of each "
        "LAYER first, then chain the layers (a mean of products is not a product of "
        "means)": lambda *args: _per_head(args[0], alpha),
        "you summed over the heads: each layer's mixture must have rows that sum to 1, so "
        "what do you divide the sum by?": summed,
        "your first layer has no residual: every layer, the first one included, gets the "
        "identity term (start from that layer's mixture, not from its raw weights)": first_raw,
    }


# --------------------------------------------------------------------------------------------
# Exercise 1. Patches back into images
# --------------------------------------------------------------------------------------------


def _unpatchify(tokens: torch.Tensor, patch: int, height: int, width: int, *,
                grid: str = "rc", inner: str = "Cpp") -> torch.Tensor:  # fmt: skip
    """``tokens`` (B, N, C p p) -> images (B, C, H, W); the keywords spell the known mistakes."""
    b, p = tokens.shape[0], patch
    rows, cols, c = height // p, width // p, tokens.shape[-1] // (p * p)
    t = tokens.double()
    if grid == "cr":  # tokens numbered top to bottom first (column-major)
        return (
            t.reshape(b, cols, rows, c, p, p).permute(0, 3, 2, 4, 1, 5).reshape(b, c, height, width)
        )
    if inner == "ppC":  # each token flattened channels last
        return (
            t.reshape(b, rows, cols, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, height, width)
        )
    if inner == "Cpp_T":  # the pixels of a patch read column by column
        return (
            t.reshape(b, rows, cols, c, p, p).permute(0, 3, 1, 5, 2, 4).reshape(b, c, height, width)
        )
    if inner == "again":  # patchify's own permutation applied a second time
        return (
            t.reshape(b, rows, cols, c, p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, c, height, width)
        )
    return t.reshape(b, rows, cols, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, height, width)


def check_unpatchify(fn: Callable[[torch.Tensor, int, int, int], torch.Tensor]) -> None:
    """Check ``fn(tokens, patch, height, width)``: put flattened patches back into images.

    ``tokens`` is ``(B, N, C * patch * patch)`` as the chapter's ``patchify`` makes it
    (patches in row-major order, each flattened in ``(C, p, p)`` order); return the images
    ``(B, C, H, W)`` with ``H = height``, ``W = width``: ``fn(patchify(x, p), p, H, W)`` must
    give ``x`` back exactly. Cases include a non-square image and patches of one pixel.
    Recognised mistakes: a plain reshape, ``patchify``'s permutation applied again instead of
    its inverse, tokens read in column-major order, tokens read channels-last, the pixels of a
    patch read column by column; ``F.fold`` without ``stride=patch`` or without the transpose
    is named from its error.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_unpatchify"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    g = torch.Generator().manual_seed(1111)
    hint = ("token 1 is the top row's second patch: where in the image do its C * p * p values "
            "go, and in which order did patchify flatten them?")  # fmt: skip
    grid_hint = ("the grid has H/p rows and W/p columns: which did you use for which? "
                 "Token n sits in row n // (W/p), column n % (W/p)")  # fmt: skip
    shapes = [  # (description, B, C, H, W, p, hint)
        ("2 grey 8 x 8 images, patch 2", 2, 1, 8, 8, 2, hint),
        ("3 RGB 12 x 12 images, patch 3", 3, 3, 12, 12, 3, hint),
        ("1 two-channel 6 x 10 image, patch 2 (not square)", 1, 2, 6, 10, 2, grid_hint),
        ("2 RGB 4 x 4 images, patch 4 (one patch each)", 2, 3, 4, 4, 4, hint),
        ("2 grey 6 x 4 images, patch 1 (one pixel per token)", 2, 1, 6, 4, 1, grid_hint),
    ]
    cases = []
    for description, b, c, h, w, p, case_hint in shapes:
        tokens = _patches(torch.randn(b, c, h, w, generator=g), p).float()  # (B, N, C p p)
        cases.append(_Case(description, (tokens, p, h, w), hint=case_hint))
    mistakes: dict[str, Callable[..., torch.Tensor]] = {
        "a plain reshape puts the values of one patch side by side in a row of the image: view "
        "the tokens as (B, H/p, W/p, C, p, p) first; which axes must then be moved?": lambda t, p, h, w: t.double().reshape(t.shape[0], -1, h, w),
        "your patches land transposed: either you applied patchify's permutation (0, 2, 4, 1, 3, "
        "5) again, where undoing it needs its inverse (where must each of the six axes go back "
        "to?), or you placed the tokens top to bottom first": partial(_unpatchify, inner="again"),
        "you placed the tokens top to bottom first (column-major): patchify numbers them left "
        "to right, then top to bottom": partial(_unpatchify, grid="cr"),
        "you read each token channels-last (p, p, C); patchify flattened it (C, p, p), channel "
        "first": partial(_unpatchify, inner="ppC"),
        "inside a patch you placed the pixels column by column: patchify flattened each "
        "channel's p x p block row by row": partial(_unpatchify, inner="Cpp_T"),
    }  # fmt: skip

    def run() -> None:
        try:
            _check(checker, fn, cases, _unpatchify, atol=1e-6, mistakes=mistakes)
        except CheckFailed as error:
            what = str(error).partition("\nHint: ")[0]
            if "sliding blocks" not in what:
                raise
            hint = ("F.fold's stride is 1 unless you pass stride=patch: it expected overlapping "
                    "patches" if "stride=(1, 1)" in what else
                    "F.fold takes (B, C * p * p, N), one patch per COLUMN: did you transpose the tokens?")  # fmt: skip
            raise CheckFailed(f"{what}\nHint: {hint}") from None

    _on_inputs_device(checker, run)


# --------------------------------------------------------------------------------------------
# Exercise 2. The class token's rollout, layer by layer
# --------------------------------------------------------------------------------------------


def _by_layer(attentions: list[torch.Tensor]) -> torch.Tensor:
    rows = [
        attention_rollout([a.double() for a in attentions[: n + 1]])[:, 0]
        for n in range(len(attentions))
    ]
    return torch.stack(rows, dim=1)  # (B, L, T)


def _rows_of(
    chained: Callable[[list[torch.Tensor]], torch.Tensor], row: bool = True
) -> Callable[..., torch.Tensor]:
    """Row 0 (or column 0) of ``chained(attentions[:l])`` for every depth l, stacked (B, L, T)."""

    def out(attentions: list[torch.Tensor]) -> torch.Tensor:
        parts = [chained(attentions[: n + 1]) for n in range(len(attentions))]
        return torch.stack([r[:, 0] if row else r[:, :, 0] for r in parts], dim=1)

    return out


def _hard_weights(g: torch.Generator, layers: int, b: int, h: int, t: int) -> list[torch.Tensor]:
    """One-hot rows: every head of every token reads exactly one token (a hard case for sums)."""
    return [
        torch.nn.functional.one_hot(torch.randint(t, (b, h, t), generator=g), t).float()
        for _ in range(layers)
    ]


def check_rollout_by_layer(fn: Callable[[list[torch.Tensor]], Any]) -> None:
    """Check ``fn(attentions)``: the class token's rollout row after every layer.

    ``attentions`` is a list of the layers' weights, first layer first, each ``(B, H, T, T)``
    with rows summing to 1. Return ``(B, L, T)``: entry ``[:, l]`` is row 0 of
    ``R_l = A_l ... A_1`` with ``A_k = 0.5 * mean_heads(W_k) + 0.5 * I`` (Abnar and Zuidema's
    rollout stopped after layer ``l``; ``[:, -1]`` is the chapter's ``rollout[:, 0]``). Cases
    include a single layer, 12 layers of 50 peaked tokens, and one-hot weights. Recognised
    mistakes: every head rolled out on its own and then averaged, the heads summed, the
    identity left out of layer 1, the product in the wrong order, each layer's own row
    without chaining, no identity at all, column 0 instead of row 0, ``(L, B, T)``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_rollout_by_layer"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    g = torch.Generator().manual_seed(2022)
    peaked = [(torch.randn(1, 12, 50, 50, generator=g) * 6).softmax(-1) for _ in range(12)]
    cases = [
        _Case("3 layers, batch 2, 4 heads, 5 tokens", (_softmax_weights(g, 3, 2, 4, 5),), hint=_ROLLOUT_HINT),
        _Case("1 layer, batch 2, 3 heads, 4 tokens", (_softmax_weights(g, 1, 2, 3, 4),), hint=_ROLLOUT_HINT),
        _Case("12 layers, batch 1, 12 heads, 50 tokens, peaked weights", (peaked,), hint=_ROLLOUT_HINT),
        _Case("2 layers, batch 3, 2 heads, 6 tokens, one-hot weights", (_hard_weights(g, 2, 3, 2, 6),), hint=_ROLLOUT_HINT),
    ]  # fmt: skip
    layer_mistakes = _head_and_layer_mistakes(0.5)
    mistakes = {hint: _rows_of(m) for hint, m in layer_mistakes.items()}
    mistakes |= {
        "you multiplied in the wrong order: the class token's row at depth l mixes what layer l "
        "read from tokens that layer l - 1 had already mixed; which matrix goes on the "
        "left?": _rows_of(lambda a: _chain(_with_identity(a), reverse=True)),
        "each entry is that layer's own row, not chained: depth l must include every layer up to "
        "l": lambda a: torch.stack([x[:, 0] for x in _with_identity(a)], dim=1),
        "you left out the residual connection: A_l = 0.5 * W_l + 0.5 * I in every layer": _rows_of(lambda a: _chain(_mean_heads(a))),
        "you took column 0 (how much the class token's INPUT reaches each output token): the "
        "class token's row is row 0": _rows_of(lambda a: _chain(_with_identity(a)), row=False),
    }  # fmt: skip

    def run() -> None:
        for number, case in enumerate(cases, start=1):  # a transposed result gets its own hint
            got = _call(checker, f"case {number} of {len(cases)} ({case.description})", fn, case)
            weights = case.args[0]
            b, layers, t = weights[0].shape[0], len(weights), weights[0].shape[-1]
            if isinstance(got, torch.Tensor) and tuple(got.shape) == (layers, b, t) and layers != b:
                raise _fail(checker, f"case {number} of {len(cases)} ({case.description})",
                            f"expected shape {(b, layers, t)}, got {tuple(got.shape)}",
                            "the batch comes first: which dimension did you stack the layers along?")  # fmt: skip
        _check(checker, fn, cases, _by_layer, atol=1e-5, mistakes=mistakes)

    _on_inputs_device(checker, run)
