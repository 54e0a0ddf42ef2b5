"""Chapter 10, GPT: self-checks for sampling filters and the language-model loss.

- :func:`check_top_k_probs`: the next-token distribution restricted to the k most likely
  tokens and renormalised (top-k sampling);
- :func:`check_top_p_probs`: the same for the nucleus, the smallest set of most likely tokens
  whose probability reaches p (Holtzman et al., 2020);
- :func:`check_causal_lm_loss`: the next-token cross-entropy, where the logits at position t
  are scored against the token at t + 1.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from mtlib.exercises._core import _Case, _check

__all__ = ["check_causal_lm_loss", "check_top_k_probs", "check_top_p_probs"]


def _logits(seed: int, *shape: int) -> torch.Tensor:
    """Distinct random logits (no ties), float64."""
    return 2.0 * torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


# --------------------------------------------------------------------------------------------
# 1. Top-k
# --------------------------------------------------------------------------------------------


def _top_k_probs(
    logits: torch.Tensor, k: int, *, keep: int | None = None, largest: bool = True
) -> torch.Tensor:
    keep = k if keep is None else keep
    index = torch.topk(logits, max(1, min(keep, logits.shape[-1])), dim=-1, largest=largest).indices
    kept = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, True)
    return torch.softmax(logits.masked_fill(~kept, float("-inf")), dim=-1)


def _top_k_unnormalised(logits: torch.Tensor, k: int) -> torch.Tensor:
    kept = _top_k_probs(logits, k) > 0
    return torch.softmax(logits, dim=-1) * kept


def check_top_k_probs(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(logits, k)``: probabilities ``(..., V)`` that are zero outside the ``k``
    largest logits of each row and proportional to ``exp(logit)`` inside (they sum to 1).

    Recognised mistakes: not renormalising after zeroing, keeping k + 1 or k - 1 tokens,
    keeping the k *smallest* logits.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case(
            "one row of 7 logits, k = 3",
            (_logits(0, 7), 3),
            hint="keep the k largest logits of each row",
        ),
        _Case("a batch (2, 3, 11), k = 4", (_logits(1, 2, 3, 11), 4)),
        _Case("k = 1 (greedy)", (_logits(2, 4, 9), 1)),
        _Case(
            "k larger than the vocabulary",
            (_logits(3, 2, 5), 8),
            hint="with k >= V keep every token",
        ),
    ]
    _check(
        "check_top_k_probs",
        fn,
        cases,
        _top_k_probs,
        atol=1e-6,
        mistakes={
            "the kept probabilities must sum to 1: take the softmax after setting the others to -inf": _top_k_unnormalised,
            "that keeps k + 1 tokens": lambda x, k: _top_k_probs(x, k, keep=k + 1),
            "that keeps k - 1 tokens": lambda x, k: _top_k_probs(x, k, keep=k - 1),
            "that keeps the k smallest logits: torch.topk(..., largest=True) gives the largest": lambda x, k: (
                _top_k_probs(x, k, largest=False)
            ),
        },
    )


# --------------------------------------------------------------------------------------------
# 2. Top-p (nucleus)
# --------------------------------------------------------------------------------------------


def _top_p_probs(
    logits: torch.Tensor, p: float, *, rule: str = "right", normalise: bool = True
) -> torch.Tensor:
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_probs, dim=-1)
    if rule == "right":  # keep a token if the mass before it is still below p
        drop_sorted = cum - sorted_probs >= p
    else:  # "strict": keep only while the running mass including it stays <= p
        drop_sorted = cum > p
        drop_sorted[..., 0] = False
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    kept = probs.masked_fill(drop, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True) if normalise else kept


def check_top_p_probs(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Check ``fn(logits, p)``: probabilities ``(..., V)`` restricted to the nucleus, the
    smallest set of most likely tokens whose probability sums to at least ``p``, renormalised.

    Recognised mistakes: dropping the token that makes the mass reach p (keeping only tokens
    while the running sum stays <= p), not renormalising.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case(
            "one row of 8 logits, p = 0.6",
            (_logits(10, 8), 0.6),
            hint="sort by probability, keep the head of the list until its mass reaches p",
        ),
        _Case("a batch (3, 12), p = 0.9", (_logits(11, 3, 12), 0.9)),
        _Case(
            "p = 0.05 (only the most likely token)",
            (_logits(12, 2, 6), 0.05),
            hint="the most likely token is always kept",
        ),
        _Case("p = 1.0 (every token)", (_logits(13, 2, 5), 1.0)),
    ]
    _check(
        "check_top_p_probs",
        fn,
        cases,
        _top_p_probs,
        atol=1e-6,
        mistakes={
            "the nucleus includes the token that makes the mass reach p: keep a token while the mass *before* it is < p": lambda x, p: (
                _top_p_probs(x, p, rule="strict")
            ),
            "renormalise the kept probabilities so they sum to 1": lambda x, p: _top_p_probs(
                x, p, normalise=False
            ),
        },
    )


# --------------------------------------------------------------------------------------------
# 3. The language-model loss
# --------------------------------------------------------------------------------------------


def _lm_loss(
    logits: torch.Tensor, idx: torch.Tensor, *, shift: int = 1, reduction: str = "mean"
) -> torch.Tensor:
    vocab = logits.shape[-1]
    if shift == 1:
        scores, targets = logits[:, :-1], idx[:, 1:]
    elif shift == -1:
        scores, targets = logits[:, 1:], idx[:, :-1]
    else:
        scores, targets = logits, idx
    return F.cross_entropy(scores.reshape(-1, vocab), targets.reshape(-1), reduction=reduction)


def check_causal_lm_loss(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(logits, idx)``: the mean next-token cross-entropy of a causal language model.

    ``logits`` (B, T, V) is the model's output for the token ids ``idx`` (B, T); the logits at
    position t predict ``idx[:, t + 1]``, so T - 1 positions per row are scored (the last has
    no target). Returns a scalar tensor.

    Recognised mistakes: no shift (each position scored against its own input token), a shift
    the wrong way, a sum instead of a mean.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    gen = torch.Generator().manual_seed(20)
    cases = [
        _Case(
            "B = 2, T = 6, V = 9",
            (_logits(21, 2, 6, 9), torch.randint(0, 9, (2, 6), generator=gen)),
            hint="which token should the logits at position t be scored against? (and the last position?)",
        ),
        _Case(
            "B = 3, T = 4, V = 13",
            (_logits(22, 3, 4, 13), torch.randint(0, 13, (3, 4), generator=gen)),
        ),
        _Case(
            "B = 1, T = 2, V = 5",
            (_logits(23, 1, 2, 5), torch.randint(0, 5, (1, 2), generator=gen)),
        ),
    ]
    _check(
        "check_causal_lm_loss",
        fn,
        cases,
        _lm_loss,
        atol=1e-6,
        mistakes={
            "no shift: position t would be trained to copy its own input token": lambda x, i: (
                _lm_loss(x, i, shift=0)
            ),
            "shifted the wrong way: logits[:, 1:] against idx[:, :-1] predicts the previous token": lambda x, i: (
                _lm_loss(x, i, shift=-1)
            ),
            "take the mean over the scored positions, not the sum": lambda x, i: _lm_loss(
                x, i, reduction="sum"
            ),
        },
    )
