"""Chapter 8, the encoder-decoder Transformer: self-checks for teacher forcing and decoding.

- :func:`check_shift_right`: labels ``y1 .. yn EOS`` -> decoder inputs ``BOS y1 .. yn``;
- :func:`check_greedy_decode`: the greedy loop, against a toy step function whose scores
  depend on the whole prefix (so feeding only the last token fails);
- :func:`check_label_smoothing_loss`: cross-entropy against the smoothed target
  ``(1 - eps) * one_hot + eps / n_vocab`` (Szegedy et al., 2016; PyTorch's ``label_smoothing``).

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from mtlib.exercises._core import _call, _Case, _check, _describe, _fail

__all__ = ["check_greedy_decode", "check_label_smoothing_loss", "check_shift_right"]


def _match_mistake(got: torch.Tensor, expected: torch.Tensor, mistakes: Sequence[tuple[str, torch.Tensor]]) -> str | None:
    for hint, wrong in mistakes:
        same_as_reference = wrong.shape == expected.shape and torch.equal(wrong, expected)
        if not same_as_reference and got.shape == wrong.shape and torch.equal(got, wrong):
            return hint
    return None


# --------------------------------------------------------------------------------------------
# 1. Shifting the targets right
# --------------------------------------------------------------------------------------------


_EOS = 2  # the end token in check_shift_right's cases


def _shift_right(labels: torch.Tensor, bos_id: int) -> torch.Tensor:
    bos = torch.full_like(labels[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, labels[:, :-1]], dim=1)  # (B, T)


def check_shift_right(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(labels, bos_id)``: the decoder's input for teacher forcing.

    ``labels`` is a long tensor ``(B, T)``, each row ``y1 .. yn EOS`` right-padded with 0; the
    result is ``(B, T)``: BOS, then the labels without their last column, so that position t
    reads label t-1 and is trained to predict label t (a shorter row keeps its EOS in the
    input, where the label is a pad). Recognised mistakes: the labels unchanged, a shift to
    the left, BOS appended at the end, the batch dimension shifted, the last column kept
    (shape ``(B, T + 1)``), BOS hard-coded as 1, EOS turned into a pad.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_shift_right"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    first = torch.tensor([[7, 8, 9, 2, 0], [5, 2, 0, 0, 0], [6, 6, 4, 3, 2]])  # (3, 5), EOS = 2
    cases = [
        _Case("3 rows of 5 labels, BOS = 1", (first, 1), hint="position 0 reads BOS; position t reads label t-1"),
        _Case("2 rows of 7 labels, BOS = 11", (torch.tensor([[3, 4, 5, 6, 7, 8, 2], [9, 10, 2, 0, 0, 0, 0]]), 11),
              hint="use the bos_id argument (11 here), not a constant; position t reads label t-1"),
        _Case("1 row of 3 labels, BOS = 1", (torch.tensor([[4, 5, 2]]), 1),
              hint="the same rule for any batch size and length: shift along dim=1"),
    ]
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        labels, bos_id = case.args
        if not isinstance(got, torch.Tensor):
            raise _fail(checker, where, f"expected a torch.Tensor, got {_describe(got)}", "return a tensor")
        if got.dtype != torch.long:
            raise _fail(checker, where, f"expected token ids of dtype torch.int64, got {got.dtype}",
                        "build the BOS column with torch.full_like(labels[:, :1], bos_id)")  # fmt: skip
        expected = _shift_right(labels, bos_id)
        bos = torch.full_like(labels[:, :1], bos_id)
        mistakes = [
            ("you return the labels unchanged: the decoder would read the token it must predict "
             "(the model learns to copy its input, and generation fails)", labels),
            ("you shifted LEFT (dropped the first label): the decoder input starts with BOS and "
             "runs one step BEHIND the labels", torch.cat([labels[:, 1:], bos], dim=1)),
            ("you shifted left without BOS: the decoder input starts with BOS and runs one step "
             "behind the labels", labels[:, 1:]),
            ("you appended BOS at the END; it goes first: position 0 reads BOS and predicts y1",
             torch.cat([labels[:, :-1], bos], dim=1)),
            ("you kept the last label: drop the last column so the input has the labels' length T "
             "(the last label, EOS or a pad, is never an input)", torch.cat([bos, labels], dim=1)),
            ("you shifted along the batch dimension (rows): shift along the time dimension, dim=1",
             torch.cat([torch.full_like(labels[:1], bos_id), labels[:-1]], dim=0)),
            ("you hard-coded BOS as 1: use the bos_id argument", torch.cat([torch.ones_like(bos), labels[:, :-1]], dim=1)),
            ("you turned EOS into a pad: the input is simply BOS, then the labels without their last "
             "column, so a shorter row keeps its EOS (harmless: the label at that position is a pad)",
             expected.masked_fill(expected == _EOS, 0)),
        ]  # fmt: skip
        hint = _match_mistake(got, expected, mistakes)
        if hint is not None:
            raise _fail(checker, where, "your output equals a known mistake", hint)
        if tuple(got.shape) != tuple(expected.shape):
            raise _fail(checker, where, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}",
                        "the decoder input has the labels' shape (B, T)")  # fmt: skip
        wrong = (got != expected).nonzero()
        if len(wrong):
            row, col = wrong[0].tolist()
            raise _fail(checker, where, f"{len(wrong)} tokens differ; the first at row {row}, position "
                        f"{col}: you return {int(got[row, col])}, expected {int(expected[row, col])}",
                        case.hint)  # fmt: skip
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 2. Greedy decoding with a step function
# --------------------------------------------------------------------------------------------


class _ToyStep:
    """A deterministic 'model': scores (n_vocab,) that depend on the whole prefix.

    The scores come from a generator seeded by the prefix, with EOS pushed up once the prefix
    reaches ``eos_after`` tokens; calls are counted.
    """

    def __init__(self, vocab: int, eos_id: int, eos_after: int | None) -> None:
        self.vocab, self.eos_id, self.eos_after, self.calls = vocab, eos_id, eos_after, 0

    def __call__(self, prefix: Any) -> torch.Tensor:
        tokens = [int(t) for t in (prefix.tolist() if isinstance(prefix, torch.Tensor) else prefix)]
        self.calls += 1
        seed = 0
        for t in tokens:
            seed = (seed * 1_000_003 + t + 1) % (2**31)
        scores = torch.randn(self.vocab, generator=torch.Generator().manual_seed(seed))  # (n_vocab,)
        scores[self.eos_id] = -5.0
        if self.eos_after is not None and len(tokens) >= self.eos_after:
            scores[self.eos_id] = 10.0
        return scores


def _greedy(step: Callable[[list[int]], torch.Tensor], bos_id: int, eos_id: int, max_len: int,
            *, last_only: bool = False, keep_going: bool = False, extra: int = 0,
            drop_bos: bool = False, drop_eos: bool = False, argmin: bool = False,
            force_eos: bool = False) -> list[int]:  # fmt: skip
    tokens = [bos_id]
    while len(tokens) < max_len + extra:
        scores = step(tokens[-1:] if last_only else list(tokens))
        token = int(scores.argmin() if argmin else scores.argmax())
        tokens.append(token)
        if token == eos_id and not keep_going:
            break
    if force_eos and tokens[-1] != eos_id:
        tokens[-1] = eos_id  # the last slot forced to EOS at max_len
    if drop_eos and tokens[-1] == eos_id:
        tokens = tokens[:-1]
    return tokens[1:] if drop_bos else tokens


def check_greedy_decode(fn: Callable[..., Any]) -> None:
    """Check ``fn(step, *, bos_id, eos_id, max_len)``: greedy decoding.

    ``step(prefix)`` takes the list of tokens so far (BOS first) and returns the scores (n_vocab,)
    of the next token. ``fn`` starts from ``[bos_id]``, appends the highest-scoring token until
    it appends ``eos_id`` or the sequence holds ``max_len`` tokens (BOS included, like
    :func:`mtlib.transformer.greedy_decode`), and returns the tokens (a list of ints or a 1-D
    tensor), BOS and EOS included. Recognised mistakes: feeding only the last token, not
    stopping at EOS, ``max_len`` off by one (either way), EOS forced at ``max_len``, BOS or EOS
    left out, argmin, 0-d tensors instead of ints.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_greedy_decode"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    cases = [  # (description, vocab, bos, eos, max_len, eos_after)
        ("vocabulary 9, EOS once the prefix has 4 tokens, max_len 8", 9, 1, 2, 8, 4),
        ("vocabulary 6, no EOS before max_len 5", 6, 0, 3, 5, None),
        ("vocabulary 13, EOS at the very end (prefix of 6), max_len 7", 13, 1, 2, 7, 6),
    ]
    mistakes = [
        ({"last_only": True}, "you pass only the last token to step: the model needs the whole prefix "
         "(without a KV cache, step sees all tokens so far)"),
        ({"keep_going": True}, "you keep going after EOS: stop as soon as you append eos_id"),
        ({"extra": 1}, "max_len counts every token including BOS: one token too many, stop when "
         "the sequence holds max_len tokens"),
        ({"extra": -1}, "max_len counts every token including BOS: one token too few, a sequence "
         "without EOS stops when it holds max_len tokens, not max_len - 1"),
        ({"force_eos": True}, "you put EOS in the last slot: a sequence that reaches max_len ends "
         "without EOS (the model never chose it; mtlib's greedy_decode leaves it unfinished)"),
        ({"drop_bos": True}, "return the sequence with BOS first (like mtlib's greedy_decode)"),
        ({"drop_eos": True}, "keep the EOS you appended at the end of the sequence"),
        ({"argmin": True}, "greedy takes the HIGHEST score (argmax)"),
    ]
    for number, (description, vocab, bos, eos, max_len, eos_after) in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({description})"
        step = _ToyStep(vocab, eos, eos_after)
        case = _Case(description, (step,), {"bos_id": bos, "eos_id": eos, "max_len": max_len})
        got = _call(checker, where, fn, case)
        if isinstance(got, torch.Tensor):
            if got.dim() != 1:
                raise _fail(checker, where, f"expected a 1-D sequence, got shape {tuple(got.shape)}",
                            "return the tokens of one sequence, e.g. a list of ints")  # fmt: skip
            got = got.tolist()
        if isinstance(got, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in got):
            raise _fail(checker, where, "expected a list of ints, got a list holding tensors",
                        "convert each token with int(...) before appending it")  # fmt: skip
        if not isinstance(got, (list, tuple)) or not all(isinstance(t, int) for t in got):
            raise _fail(checker, where, f"expected a list of ints, got {_describe(got)}",
                        "return the tokens, e.g. [bos_id, 5, 7, eos_id]")  # fmt: skip
        got = list(got)
        reference = _ToyStep(vocab, eos, eos_after)
        expected = _greedy(reference, bos, eos, max_len)
        if got == expected:
            if step.calls != len(expected) - 1:
                raise _fail(checker, where, f"step was called {step.calls} times for "
                            f"{len(expected) - 1} new tokens", "call step once per new token")  # fmt: skip
            continue
        for kwargs, hint in mistakes:
            wrong = _greedy(_ToyStep(vocab, eos, eos_after), bos, eos, max_len, **kwargs)  # type: ignore[arg-type]
            if wrong != expected and got == wrong:
                raise _fail(checker, where, "your output equals a known mistake", hint)
        raise _fail(checker, where, f"expected {expected}, got {got}"[:300],
                    "start from [bos_id]; each step appends argmax(step(tokens)); stop at eos_id or max_len")  # fmt: skip
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 3. Label smoothing
# --------------------------------------------------------------------------------------------


def _smoothed_loss(logits: torch.Tensor, targets: torch.Tensor, epsilon: float) -> torch.Tensor:
    return F.cross_entropy(logits.double(), targets, label_smoothing=epsilon)


def _target_entropy(epsilon: float, vocab: int) -> float:
    """H(y~), the entropy of the smoothed target (the same for every row): the cross-entropy's minimum."""
    q = torch.full((vocab,), epsilon / vocab, dtype=torch.float64)
    q[0] += 1 - epsilon
    return float(-(q * q.clamp_min(1e-300).log()).sum())


def check_label_smoothing_loss(fn: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]) -> None:
    """Check ``fn(logits, targets, epsilon)``: the label-smoothed cross-entropy, averaged.

    ``logits`` (N, n_vocab) float, ``targets`` (N,) long; the target distribution of row i is
    ``(1 - epsilon) * one_hot(targets[i]) + epsilon / n_vocab`` (the smoothing mass spread over all n_vocab
    classes, the true one included, as in Szegedy et al. 2016 and PyTorch's
    ``F.cross_entropy(..., label_smoothing=epsilon)``); the result is the mean over rows of
    ``-sum_k y~_k log softmax(logits)_k``, a scalar tensor. Cases have N != n_vocab and large logits, hundreds apart
    (``log(softmax(.))`` underflows to ``-inf`` there; ``log_softmax`` does not).

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_label_smoothing_loss"
    g = torch.Generator().manual_seed(8)
    hint = ("check your target q against section 8.3 (each row sums to 1; the true class gets "
            "1 - epsilon + epsilon / n_vocab), average over the rows, and take log-probabilities with "
            "log_softmax (log(softmax) underflows for large logits)")  # fmt: skip
    cases = [
        _Case("N=4 rows, n_vocab=7 classes, epsilon=0.1", (torch.randn(4, 7, generator=g), torch.tensor([0, 6, 3, 3]), 0.1), hint=hint),
        _Case("N=3, n_vocab=5, epsilon=0 (plain cross-entropy)", (torch.randn(3, 5, generator=g) * 3, torch.tensor([4, 1, 0]), 0.0), hint=hint),
        _Case("N=2, n_vocab=11, epsilon=0.3, logits near 1000 and hundreds apart", (torch.randn(2, 11, generator=g) * 60 + 1000.0, torch.tensor([10, 2]), 0.3), hint=hint),
    ]  # fmt: skip
    for number, case in enumerate(cases, start=1):
        logits, targets, eps = case.args
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        if not isinstance(got, torch.Tensor) or got.dim() != 0 or not got.is_floating_point():
            continue  # _check below reports the type or shape
        log_p = logits.double().log_softmax(-1)
        one_hot = F.one_hot(targets, logits.shape[-1]).double()
        nll = -(one_hot * log_p).sum(-1)  # (N,)
        v = logits.shape[-1]
        mistakes = [
            ("you spread epsilon over the n_vocab - 1 WRONG classes only; this book (like PyTorch and "
             "Szegedy et al.) spreads epsilon / n_vocab over all n_vocab classes, the true one included",
             (-(((1 - eps) * one_hot + eps / (v - 1) * (1 - one_hot)) * log_p).sum(-1)).mean()),
            ("your loss ignores epsilon (plain cross-entropy)", nll.mean()),
            ("you return the sum over rows; average over the N rows", F.cross_entropy(logits.double(), targets, label_smoothing=eps, reduction="sum")),
            ("you scaled the cross-entropy by (1 - epsilon) but forgot the uniform part "
             "epsilon * mean_k(-log p_k)", ((1 - eps) * nll).mean()),
            ("your loss is the cross-entropy minus a constant: which one? (It is the KL divergence, "
             "as nn.KLDivLoss computes it in the Annotated Transformer; its minimum is 0.) The book "
             "wants the cross-entropy, whose minimum is the floor of section 8.3",
             _smoothed_loss(logits, targets, eps) - _target_entropy(eps, v)),
        ]  # fmt: skip
        expected = _smoothed_loss(logits, targets, eps)
        for message, wrong in mistakes:
            if abs(float(wrong) - float(expected)) > 1e-4 and abs(float(got) - float(wrong)) < 1e-4:
                raise _fail(checker, where, "your loss equals a known mistake", message)
    _check(checker, fn, cases, _smoothed_loss, atol=1e-4)
