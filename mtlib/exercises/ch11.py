"""Chapter 11, the Vision Transformer: self-checks for patches and attention rollout.

- :func:`check_patch_embedding`: images ``(B, C, H, W)`` -> patches ``(B, N, C * p * p)``, the
  patches in row-major order and each one flattened in ``(C, p, p)`` order (the order in which
  a ``Conv2d`` with kernel and stride ``p`` reads them, so a linear layer on these patches
  equals the convolution);
- :func:`check_attention_rollout`: Abnar and Zuidema's rollout, ``R = A_L ... A_1`` with
  ``A_l = 0.5 * mean_heads(W_l) + 0.5 * I``;
- :func:`check_alpha_rollout`: the same with the residual weighted by ``alpha``,
  ``A_l = (1 - alpha) * mean_heads(W_l) + alpha * I``;
- :func:`check_unpatchify`: the inverse of cutting into patches, ``(B, N, C * p * p)`` ->
  ``(B, C, H, W)`` (the chapter's exercise 1);
- :func:`check_rollout_by_layer`: the class token's rollout row after each layer, ``(B, L, T)``
  (the chapter's exercise 2).

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
    "check_alpha_rollout",
    "check_attention_rollout",
    "check_patch_embedding",
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
# 1. Cutting images into patches
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


def check_patch_embedding(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(images, patch)``: cut images into flattened, non-overlapping patches.

    ``images`` is ``(B, C, H, W)`` with ``H`` and ``W`` divisible by ``patch``; the result is
    ``(B, N, C * patch * patch)`` with ``N = (H / patch) * (W / patch)``: patches in row-major
    order (left to right, then top to bottom), each flattened channel by channel, then row by
    row: ``(C, p, p)``, the layout of a ``Conv2d`` weight. Recognised mistakes: a plain reshape
    that mixes pixels of different patches, patches in column-major order, channels last,
    ``(B, C * p * p, N)`` (``F.unfold`` without the transpose), pixels of a patch read
    column by column.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_patch_embedding"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    g = torch.Generator().manual_seed(11)
    hint = ("which pixels end up in token 1 (top row, second from the left)? Compare with "
            "images[0, :, 0:p, p:2*p]")  # fmt: skip
    cases = [
        _Case("2 grey 8 x 8 images, patch 2", (torch.randn(2, 1, 8, 8, generator=g), 2), hint=hint),
        _Case("3 RGB 12 x 12 images, patch 3", (torch.randn(3, 3, 12, 12, generator=g), 3), hint=hint),
        _Case("1 two-channel 6 x 10 image, patch 2 (not square)", (torch.randn(1, 2, 6, 10, generator=g), 2), hint=hint),
        _Case("4 RGB 4 x 4 images, patch 4 (one patch each)", (torch.randn(4, 3, 4, 4, generator=g), 4), hint=hint),
    ]  # fmt: skip
    for number, case in enumerate(cases, start=1):
        images, patch = case.args
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        b, c, h, w = images.shape
        n, d = (h // patch) * (w // patch), c * patch * patch
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (b, d, n) and n != d:
            raise _fail(checker, where, f"expected shape {(b, n, d)}, got {tuple(got.shape)}",
                        "one patch per ROW: transpose the last two dimensions (F.unfold returns (B, C*p*p, N))")  # fmt: skip
        overlapping = (h - patch + 1) * (w - patch + 1)  # F.unfold's default stride is 1
        if isinstance(got, torch.Tensor) and overlapping != n and overlapping in got.shape[1:]:
            raise _fail(checker, where, f"expected shape {(b, n, d)}, got {tuple(got.shape)}: "
                        f"{overlapping} patches, not {n}",
                        "how far apart do neighbouring patches start? F.unfold's stride is 1 unless "
                        "you pass stride=patch: you cut overlapping patches")  # fmt: skip
    mistakes = {
        "a plain reshape mixes pixels of different patches: reshape to (B, C, H/p, p, W/p, p) "
        "and permute before flattening": lambda x, p: x.reshape(
            x.shape[0], -1, x.shape[1] * p * p
        ).double(),
        "your patches are in column-major order (top to bottom first): number them left to "
        "right, then top to bottom (row-major)": lambda x, p: _patches(x, p, (0, 4, 2, 1, 3, 5)),
        "you flattened each patch channels-last (p, p, C); this book (and Conv2d's weight) uses "
        "(C, p, p): channel first, then rows": lambda x, p: _patches(x, p, (0, 2, 4, 3, 5, 1)),
        "inside a patch you read the pixels column by column: flatten (C, p, p) row by "
        "row": lambda x, p: _patches(x, p, (0, 2, 4, 1, 5, 3)),
        "after Tensor.unfold the channel axis is still in front of the grid axes: move C "
        "behind them before flattening": lambda x, p: (
            x.unfold(2, p, p).unfold(3, p, p).reshape(x.shape[0], -1, x.shape[1] * p * p).double()
        ),
    }
    _check(checker, fn, cases, _patches, atol=0.0, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 2. Attention rollout
# --------------------------------------------------------------------------------------------


def _mean_heads(attentions: list[torch.Tensor]) -> list[torch.Tensor]:
    return [a.double().mean(1) for a in attentions]  # (B, T, T) each


def _chain(matrices: list[torch.Tensor], *, reverse: bool = False) -> torch.Tensor:
    out = matrices[0]
    for a in matrices[1:]:
        out = out @ a if reverse else a @ out
    return out


def _rollout(attentions: list[torch.Tensor]) -> torch.Tensor:
    return attention_rollout([a.double() for a in attentions])


def _with_identity(attentions: list[torch.Tensor], weight: float = 0.5) -> list[torch.Tensor]:
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    return [
        weight * a + (1 - weight) * eye if weight < 1 else a + eye for a in _mean_heads(attentions)
    ]


def _softmax_weights(g: torch.Generator, layers: int, b: int, h: int, t: int) -> list[torch.Tensor]:
    return [(torch.randn(b, h, t, t, generator=g) * 2).softmax(-1) for _ in range(layers)]


_ROLLOUT_HINT = ("work one case by hand: with a single layer, what should the result be, and do its "
                 "rows sum to 1? Then with two layers, which one multiplies from the left?")  # fmt: skip


def _per_head(attentions: list[torch.Tensor], alpha: float) -> torch.Tensor:
    """Rollout of every head on its own (B, H, T, T), then the mean over heads: a published
    variant, and a different number (the mean of products is not the product of means)."""
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    return _chain([(1 - alpha) * a.double() + alpha * eye for a in attentions]).mean(1)


def _head_and_layer_mistakes(alpha: float | None) -> dict[str, Callable[..., torch.Tensor]]:
    """Mistakes of the head average and of the first layer; ``alpha=None``: taken from the case."""

    def weight(args: tuple[Any, ...]) -> float:
        return float(args[1]) if alpha is None else alpha

    def eye(a: list[torch.Tensor]) -> torch.Tensor:
        return torch.eye(a[0].shape[-1], dtype=torch.float64)

    def summed(*args: Any) -> torch.Tensor:
        al = weight(args)
        return _chain([(1 - al) * x.double().sum(1) + al * eye(args[0]) for x in args[0]])

    def first_raw(*args: Any) -> torch.Tensor:
        al, a = weight(args), _mean_heads(args[0])
        return _chain([a[0]] + [(1 - al) * x + al * eye(args[0]) for x in a[1:]])

    return {
        "you rolled out every head on its own and then averaged: average the heads of each "
        "LAYER first, then chain the layers (a mean of products is not a product of "
        "means)": lambda *args: _per_head(args[0], weight(args)),
        "you summed over the heads: each layer's mixture must have rows that sum to 1, so "
        "what do you divide the sum by?": summed,
        "your first layer has no residual: every layer, the first one included, gets the "
        "identity term (start from that layer's mixture, not from its raw weights)": first_raw,
    }


def check_attention_rollout(fn: Callable[[list[torch.Tensor]], Any]) -> None:
    """Check ``fn(attentions)``: attention rollout (Abnar and Zuidema, 2020).

    ``attentions`` is a list of the layers' weights, first layer first, each ``(B, H, T, T)``
    with rows summing to 1. Average each layer over its heads, add the residual connection as
    ``A_l = 0.5 * W_l + 0.5 * I``, and chain the layers with later layers on the left:
    ``R = A_L ... A_2 A_1``; return ``R`` ``(B, T, T)``. Recognised mistakes: the product in
    the wrong order, no identity, ``W + I`` without halving, the maximum over heads, the last
    layer alone.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_attention_rollout"
    g = torch.Generator().manual_seed(2020)
    hint = _ROLLOUT_HINT
    cases = [
        _Case("3 layers, batch 2, 4 heads, 5 tokens", (_softmax_weights(g, 3, 2, 4, 5),), hint=hint),
        _Case("2 layers, batch 1, 3 heads, 7 tokens", (_softmax_weights(g, 2, 1, 3, 7),), hint=hint),
        _Case("4 layers, batch 3, 2 heads, 4 tokens", (_softmax_weights(g, 4, 3, 2, 4),), hint=hint),
    ]  # fmt: skip
    mistakes = {
        "you multiplied in the wrong order: later layers go on the LEFT, R = A_L ... A_1 (the "
        "class token's row mixes the previous layer's outputs)": lambda a: _chain(_with_identity(a), reverse=True),
        "you left out the residual connection: A_l = 0.5 * W_l + 0.5 * I": lambda a: _chain(_mean_heads(a)),
        "you added the identity without halving (W + I): rows must still sum to 1, "
        "A_l = 0.5 * W_l + 0.5 * I": lambda a: _chain(_with_identity(a, 1.0)),
        "you took the maximum over heads; rollout averages the heads": lambda a: _chain(
            [0.5 * x.double().amax(1) + 0.5 * torch.eye(x.shape[-1], dtype=torch.float64) for x in a]
        ),
        "you used the last layer only: chain all the layers": lambda a: _with_identity(a)[-1],
        **_head_and_layer_mistakes(0.5),
    }  # fmt: skip
    _on_inputs_device(
        checker, lambda: _check(checker, fn, cases, _rollout, atol=1e-5, mistakes=mistakes)
    )


# --------------------------------------------------------------------------------------------
# 2'. Rollout with a residual weight alpha
# --------------------------------------------------------------------------------------------


def _alpha_layers(attentions: list[torch.Tensor], alpha: float) -> list[torch.Tensor]:
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    return [(1 - alpha) * a + alpha * eye for a in _mean_heads(attentions)]  # (B, T, T) each


def _alpha_rollout(attentions: list[torch.Tensor], alpha: float) -> torch.Tensor:
    return attention_rollout([a.double() for a in attentions], residual_weight=alpha)


def check_alpha_rollout(fn: Callable[[list[torch.Tensor], float], Any]) -> None:
    """Check ``fn(attentions, alpha)``: attention rollout with the residual weighted by ``alpha``.

    ``attentions`` is a list of the layers' weights, first layer first, each ``(B, H, T, T)``
    with rows summing to 1; ``alpha`` is in [0, 1]. Average each layer over its heads,
    ``A_l = (1 - alpha) * mean_heads(W_l) + alpha * I``, and chain the layers with later
    layers on the left: ``R = A_L ... A_2 A_1``; return ``R`` ``(B, T, T)``. ``alpha = 0.5`` is
    Abnar and Zuidema's rollout, ``alpha = 0`` chains the raw weights, ``alpha = 1`` gives
    the identity. Recognised mistakes: the weights swapped (``alpha`` on the attention),
    ``alpha`` ignored (always 0.5), the product in the wrong order, ``W + alpha * I``
    without the ``1 - alpha``, the maximum over heads, the last layer alone.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_alpha_rollout"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    g = torch.Generator().manual_seed(2021)
    hint = _ROLLOUT_HINT
    cases = [
        _Case("3 layers, batch 2, 4 heads, 5 tokens, alpha 0.3", (_softmax_weights(g, 3, 2, 4, 5), 0.3), hint=hint),
        _Case("2 layers, batch 1, 3 heads, 7 tokens, alpha 0.8", (_softmax_weights(g, 2, 1, 3, 7), 0.8), hint=hint),
        _Case("4 layers, batch 3, 2 heads, 4 tokens, alpha 0.5", (_softmax_weights(g, 4, 3, 2, 4), 0.5), hint=hint),
        _Case("3 layers, batch 2, 2 heads, 6 tokens, alpha 0 (raw weights)", (_softmax_weights(g, 3, 2, 2, 6), 0.0), hint=hint),
    ]  # fmt: skip
    eye = torch.eye
    mistakes = {
        "alpha weighs the identity (the residual), 1 - alpha the attention: "
        "A_l = (1 - alpha) * W_l + alpha * I": lambda a, al: _chain(_alpha_layers(a, 1 - al)),
        "your result does not change with alpha: use the alpha you are given, not "
        "0.5": lambda a, al: _chain(_alpha_layers(a, 0.5)),
        "you multiplied in the wrong order: later layers go on the LEFT, R = A_L ... A_1 (the "
        "class token's row mixes the previous layer's outputs)": lambda a, al: _chain(_alpha_layers(a, al), reverse=True),
        "you added alpha * I to the full weights: scale them by (1 - alpha) so that rows still "
        "sum to 1": lambda a, al: _chain([x + al * eye(x.shape[-1], dtype=torch.float64) for x in _mean_heads(a)]),
        "you took the maximum over heads; rollout averages the heads": lambda a, al: _chain(
            [(1 - al) * x.double().amax(1) + al * eye(x.shape[-1], dtype=torch.float64) for x in a]
        ),
        "you used the last layer only: chain all the layers": lambda a, al: _alpha_layers(a, al)[-1],
        **_head_and_layer_mistakes(None),
    }  # fmt: skip
    _on_inputs_device(
        checker, lambda: _check(checker, fn, cases, _alpha_rollout, atol=1e-5, mistakes=mistakes)
    )


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
