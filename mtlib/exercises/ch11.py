"""Chapter 11, the Vision Transformer: self-checks for patches and attention rollout.

- :func:`check_patch_embedding`: images ``(B, C, H, W)`` -> patches ``(B, N, C * p * p)``, the
  patches in row-major order and each one flattened in ``(C, p, p)`` order (the order in which
  a ``Conv2d`` with kernel and stride ``p`` reads them, so a linear layer on these patches
  equals the convolution);
- :func:`check_attention_rollout`: Abnar and Zuidema's rollout, ``R = A_L ... A_1`` with
  ``A_l = 0.5 * mean_heads(W_l) + 0.5 * I``;
- :func:`check_alpha_rollout`: the same with the residual weighted by ``alpha``,
  ``A_l = (1 - alpha) * mean_heads(W_l) + alpha * I`` (the chapter's exercise 2).

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mtlib.exercises._core import _call, _Case, _check, _describe, _fail
from mtlib.models.vit import attention_rollout

__all__ = ["check_alpha_rollout", "check_attention_rollout", "check_patch_embedding"]


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
    hint = "reshape to (B, C, H/p, p, W/p, p), move the two grid axes to the front, then flatten"
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
    hint = "A_l = 0.5 * W_l.mean(1) + 0.5 * I; R = A_1, then R = A_l @ R for l = 2 .. L"
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
    }  # fmt: skip
    _check(checker, fn, cases, _rollout, atol=1e-5, mistakes=mistakes)


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
    hint = "A_l = (1 - alpha) * W_l.mean(1) + alpha * I; R = A_1, then R = A_l @ R for l = 2 .. L"
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
    }  # fmt: skip
    _check(checker, fn, cases, _alpha_rollout, atol=1e-5, mistakes=mistakes)
