"""Chapter 10, GPT: self-checks for sampling filters and the language-model loss.

- :func:`check_top_k_probs`: the next-token distribution restricted to the k most likely
  tokens and renormalised (top-k sampling);
- :func:`check_min_p_probs`: the same for the tokens whose probability is at least
  ``p_min`` times the largest one (min-p sampling), a filter the chapter does not give;
- :func:`check_causal_lm_loss`: the next-token cross-entropy, where the logits at position t
  are scored against the token at t + 1.

Each checker recognises the typical mistakes and names them. Each has a numerically hard case
(logits near 1000, where ``exp`` overflows and a probability can underflow to 0), and the
filters have a case whose rows already hold ``-inf`` (the output of another filter). The
inputs are CPU float64 tensors; a result computed on another device is moved back before the
comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from mtlib.exercises._core import _Case, _check

__all__ = ["check_causal_lm_loss", "check_min_p_probs", "check_top_k_probs"]

_OVERFLOW = (
    "exp(1000) overflows to inf (float64 holds up to about e^709), and inf / inf is NaN: "
    "subtract each row's maximum logit before exp, as torch.softmax does"
)


def _logits(seed: int, *shape: int) -> torch.Tensor:
    """Distinct random logits (no ties), float64."""
    return 2.0 * torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


def _near_1000(*rows: list[float]) -> torch.Tensor:
    """Logits near 1000 (integers and halves: exact in float32 too), float64."""
    return torch.tensor(rows, dtype=torch.float64)


_HARD = _near_1000(
    [1000.0, 999.0, 990.0, 998.5, 0.0, 995.0, -3.0],
    [997.0, 1000.0, 999.5, 10.0, 996.0, 1000.5, 998.0],
)


def _with_minus_inf(seed: int, rows: int, vocab: int, keep: int) -> torch.Tensor:
    """Random logits with all but the ``keep`` largest of each row set to -inf (top-k's output)."""
    x = _logits(seed, rows, vocab)
    kth = torch.topk(x, keep, dim=-1).values[..., -1:]
    return x.masked_fill(x < kth, float("-inf"))


_KEPT_MIN_P = "the most likely token is always kept: compare with >=, not >, or a row loses every token"


def _not_near_1000(mistake: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``mistake``, skipped on the logits near 1000 (``_check`` skips a mistake that raises
    RuntimeError). For a mistake that drops every token of a row (0 / 0 = NaN): there, an
    all-NaN row is an ``exp`` that overflowed, which the case's own hint names."""

    def guarded(logits: torch.Tensor, *args: float) -> torch.Tensor:
        if logits.isfinite().any() and logits[logits.isfinite()].abs().max() > 500:
            raise RuntimeError("not on the numerically hard case")
        return mistake(logits, *args)

    return guarded


# --------------------------------------------------------------------------------------------
# 1. Top-k
# --------------------------------------------------------------------------------------------


def _top_k_kept(logits: torch.Tensor, keep: int, largest: bool = True) -> torch.Tensor:
    index = torch.topk(logits, max(1, min(keep, logits.shape[-1])), dim=-1, largest=largest).indices
    return torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, True)


def _top_k_probs(
    logits: torch.Tensor,
    k: int,
    *,
    keep: int | None = None,
    largest: bool = True,
    output: str = "probs",
) -> torch.Tensor:
    kept = _top_k_kept(logits, k if keep is None else keep, largest)
    filtered = logits.masked_fill(~kept, float("-inf"))
    if output == "logits":  # the filtered logits, not their softmax
        return filtered
    if output == "unnormalised":  # the full softmax, zeroed outside the k kept tokens
        return torch.softmax(logits, dim=-1) * kept
    return torch.softmax(filtered, dim=-1)


def check_top_k_probs(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(logits, k)``: probabilities ``(..., n_vocab)`` that are zero outside the ``k``
    largest logits of each row and proportional to ``exp(logit)`` inside (they sum to 1).

    Recognised mistakes: returning the filtered logits instead of probabilities, not
    renormalising after zeroing, keeping k + 1 or k - 1 tokens, keeping the k *smallest*
    logits; an ``exp`` that overflows on logits near 1000 gets a hint that says so.

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
        _Case("logits near 1000, k = 3", (_HARD, 3), hint=_OVERFLOW),
    ]
    _check(
        "check_top_k_probs",
        fn,
        cases,
        _top_k_probs,
        atol=1e-6,
        mistakes={
            "return probabilities, not the filtered logits: take the softmax after setting the others to -inf": lambda x, k: (
                _top_k_probs(x, k, output="logits")
            ),
            "the kept probabilities must sum to 1: take the softmax after setting the others to -inf": lambda x, k: (
                _top_k_probs(x, k, output="unnormalised")
            ),
            "that keeps k + 1 tokens": lambda x, k: _top_k_probs(x, k, keep=k + 1),
            "that keeps k - 1 tokens": lambda x, k: _top_k_probs(x, k, keep=k - 1),
            "that keeps the k smallest logits: torch.topk(..., largest=True) gives the largest": lambda x, k: (
                _top_k_probs(x, k, largest=False)
            ),
        },
    )


# --------------------------------------------------------------------------------------------
# 2. Min-p
# --------------------------------------------------------------------------------------------


def _min_p_probs(logits: torch.Tensor, p_min: float, *, rule: str = "right") -> torch.Tensor:
    probs = torch.softmax(logits, dim=-1)
    top = probs.amax(dim=-1, keepdim=True)
    if rule == "right":  # p >= p_min * p_max, i.e. logit >= max logit + log(p_min)
        kept = probs >= p_min * top
    elif rule == "strict":  # p > p_min * p_max: at p_min = 1 not even the most likely token
        kept = probs > p_min * top
    elif rule == "absolute":  # p >= p_min, the threshold not scaled by the largest probability
        kept = probs >= p_min
    elif rule == "logit":  # logit >= p_min * max logit: a threshold on the scores themselves
        kept = logits >= p_min * logits.amax(dim=-1, keepdim=True)
    elif rule == "log_sign":  # logit >= max logit - log(p_min): log(p_min) is negative
        kept = logits >= logits.amax(dim=-1, keepdim=True) - math.log(p_min)
    elif rule == "unnormalised":
        return probs * (probs >= p_min * top)
    elif rule == "logits":  # the filtered logits, not their softmax
        return logits.masked_fill(probs < p_min * top, float("-inf"))
    else:
        raise ValueError(rule)
    return torch.softmax(logits.masked_fill(~kept, float("-inf")), dim=-1)


def check_min_p_probs(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Check ``fn(logits, p_min)``: min-p sampling's distribution ``(..., n_vocab)``. A token is kept
    if its probability is at least ``p_min`` times the largest probability of its row (so the
    most likely token always is); the kept probabilities are renormalised to sum to 1.

    Recognised mistakes: returning the filtered logits, not renormalising, a strict ``>`` (which
    at ``p_min = 1`` drops every token), an absolute threshold ``p >= p_min``, a threshold on
    the logits ``logit >= p_min * max logit``, the log-space threshold with the wrong sign;
    an ``exp`` that overflows on logits near 1000 gets a hint that says so.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case(
            "one row of 8 logits, p_min = 0.1",
            (_logits(30, 8), 0.1),
            hint="keep a token when its probability is at least p_min times the largest "
            "probability of its row, then renormalise",
        ),
        _Case("a batch (2, 3, 10), p_min = 0.05", (_logits(31, 2, 3, 10), 0.05)),
        _Case(
            "p_min = 1.0 (only the most likely token)",
            (_logits(32, 3, 6), 1.0),
            hint="the most likely token always passes: its probability equals p_min * p_max "
            "at p_min = 1",
        ),
        _Case(
            "rows already filtered by top-k (-inf outside the 5 largest), p_min = 0.2",
            (_with_minus_inf(33, 3, 9, 5), 0.2),
            hint="a -inf logit has probability 0: it stays dropped",
        ),
        _Case("logits near 1000, p_min = 0.1", (_HARD, 0.1), hint=_OVERFLOW),
    ]
    _check(
        "check_min_p_probs",
        fn,
        cases,
        _min_p_probs,
        atol=1e-6,
        mistakes={
            "return probabilities, not the filtered logits: take the softmax after setting the others to -inf": lambda x, p: (
                _min_p_probs(x, p, rule="logits")
            ),
            "renormalise the kept probabilities so they sum to 1": lambda x, p: _min_p_probs(
                x, p, rule="unnormalised"
            ),
            f"{_KEPT_MIN_P} (0 / 0 = NaN)": _not_near_1000(
                lambda x, p: _min_p_probs(x, p, rule="strict")
            ),
            f"{_KEPT_MIN_P} (a row of zeros)": _not_near_1000(
                lambda x, p: _min_p_probs(x, p, rule="strict").nan_to_num(0.0)
            ),
            "the threshold is relative: p_min times the row's largest probability, not p_min itself": lambda x, p: (
                _min_p_probs(x, p, rule="absolute")
            ),
            "the threshold is on probabilities: p >= p_min * p_max is logit >= max logit + log(p_min), not logit >= p_min * max logit": lambda x, p: (
                _min_p_probs(x, p, rule="logit")
            ),
            "log(p_min) is negative: keep logit >= max logit + log(p_min)": _not_near_1000(
                lambda x, p: _min_p_probs(x, p, rule="log_sign")
            ),
        },
    )


# --------------------------------------------------------------------------------------------
# 3. The language-model loss
# --------------------------------------------------------------------------------------------


def _scored(logits: torch.Tensor, idx: torch.Tensor, shift: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """The (N, n_vocab) scores and (N,) targets of the scored positions."""
    vocab = logits.shape[-1]
    if shift == 1:
        scores, targets = logits[:, :-1], idx[:, 1:]
    elif shift == -1:
        scores, targets = logits[:, 1:], idx[:, :-1]
    else:
        scores, targets = logits, idx
    return scores.reshape(-1, vocab), targets.reshape(-1)


def _lm_loss(
    logits: torch.Tensor,
    idx: torch.Tensor,
    *,
    shift: int = 1,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    scores, targets = _scored(logits, idx, shift)
    return F.cross_entropy(scores, targets, reduction=reduction, label_smoothing=label_smoothing)


def _lm_loss_nll_of(logits: torch.Tensor, idx: torch.Tensor, what: str) -> torch.Tensor:
    """F.nll_loss on probabilities or raw logits instead of log-probabilities."""
    scores, targets = _scored(logits, idx)
    return F.nll_loss(scores.softmax(dim=-1) if what == "probs" else scores, targets)


def _lm_loss_over_all(logits: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The right sum divided by B * T, the number of positions, not of scored ones."""
    return _lm_loss(logits, idx, reduction="sum") / idx.numel()


def check_causal_lm_loss(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(logits, idx)``: the mean next-token cross-entropy of a causal language model.

    ``logits`` (B, T, n_vocab) is the model's output for the token ids ``idx`` (B, T); the logits at
    position t predict ``idx[:, t + 1]``, so T - 1 positions per row are scored (the last has
    no target). Returns a scalar tensor.

    Recognised mistakes: no shift (each position scored against its own input token), a shift
    the wrong way, a sum instead of a mean, dividing by B * T instead of B * (T - 1),
    ``F.nll_loss`` on probabilities or on raw logits, label smoothing; ``softmax(...).log()``
    or ``exp`` on logits near 1000 (log 0 = -inf, inf / inf) gets a hint that says so.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    gen = torch.Generator().manual_seed(20)
    hard = _near_1000(  # (1, 4, 6): the targets 0.0 and 10.0 are ~1000 below the maximum
        [1000.0, 999.0, 990.0, 0.0, 998.5, 995.0],
        [997.0, 1000.0, 999.5, 10.0, 996.0, 1000.5],
        [999.0, 998.0, 1000.0, 997.5, 5.0, 990.0],
        [1000.0, 0.0, 999.0, 998.0, 997.0, 996.0],
    )[None]
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
        _Case(
            "logits near 1000, B = 1, T = 4, V = 6",
            (hard, torch.tensor([[0, 3, 3, 4]])),
            hint="exp(1000) overflows to inf, and softmax(...).log() gives log(0) = -inf where a "
            "probability underflows to 0 (below about e^-745 in float64): use F.log_softmax or "
            "F.cross_entropy on the logits (they subtract each row's maximum)",
        ),
    ]
    _check(
        "check_causal_lm_loss",
        fn,
        cases,
        _lm_loss,
        atol=1e-4,  # a loss near 1000 computed in float32 is off by up to ~3e-5
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
            "divide by the number of scored positions, B * (T - 1): the last position has no target": _lm_loss_over_all,
            "F.nll_loss expects log-probabilities: take log_softmax first (or F.cross_entropy on the logits)": lambda x, i: (
                _lm_loss_nll_of(x, i, "probs")
            ),
            "F.nll_loss expects log-probabilities, not logits: take log_softmax first (or F.cross_entropy on the logits)": lambda x, i: (
                _lm_loss_nll_of(x, i, "logits")
            ),
            "no label smoothing here: the loss is the plain cross-entropy with the next token": lambda x, i: (
                _lm_loss(x, i, label_smoothing=0.1)
            ),
        },
    )
