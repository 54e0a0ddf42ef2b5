"""Chapter 2, tokens and embeddings: applying BPE merges, greedy longest-match, tied logits."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from mtlib.data.bpe import _merge  # the merge step BPETokenizer uses
from mtlib.exercises._core import CheckFailed, _Case, _check, _learner_line

__all__ = ["check_apply_merges", "check_longest_match", "check_tied_logits"]

_FIRST_MERGE_ID = 256  # byte-level BPE: ids 0..255 are bytes, merge r gets id 256 + r


def _fail(checker: str, where: str, what: str, hint: str = "") -> CheckFailed:
    message = f"{checker} failed on {where}: {what}"
    if hint:
        message += f"\nHint: {hint}"
    return CheckFailed(message)


def _check_list(
    checker: str,
    fn: Callable[..., Any],
    cases: Sequence[_Case],
    reference: Callable[..., list[Any]],
    item_type: type,
) -> None:
    """Like ``_core._check`` for functions that return a list of ints or strings."""
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {type(fn).__name__}")
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        args = tuple(list(a) if isinstance(a, list) else a for a in case.args)
        try:
            got = fn(*args)
        except Exception as error:  # the learner's bug, reported in words, with their line
            stub = isinstance(error, NotImplementedError)  # not written yet: no line, no hint
            what = f"your function raised {type(error).__name__}: {error}"
            raise _fail(
                checker, where, what + ("" if stub else _learner_line(error)), "" if stub else case.hint
            ) from None
        if any(isinstance(a, list) and a != b for a, b in zip(case.args, args, strict=True)):
            raise _fail(
                checker, where, "your function changed its input list in place", "build a new list"
            )
        if isinstance(got, tuple):  # the chapter's own merge() returns a tuple: accept it
            got = list(got)
        if not isinstance(got, list) or not all(isinstance(x, item_type) for x in got):
            raise _fail(
                checker,
                where,
                f"expected a list of {item_type.__name__}, got {type(got).__name__} {got!r}"[:160],
            )
        expected = reference(*case.args)
        if got != expected:
            first = next(
                (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                min(len(got), len(expected)),
            )
            raise _fail(
                checker,
                where,
                f"expected {len(expected)} items, got {len(got)}; the first difference is at "
                f"position {first} (you returned {got[first : first + 3]!r}...)",
                case.hint,
            )
    print(f"{checker}: all {len(cases)} cases passed.")


# ---------------------------------------------------------------------------- BPE merges
def _apply_merges_reference(ids: list[int], merges: list[tuple[int, int]]) -> list[int]:
    for rank, pair in enumerate(merges):
        ids = _merge(ids, (pair[0], pair[1]), _FIRST_MERGE_ID + rank)
    return ids


def check_apply_merges(fn: Callable[[list[int], list[tuple[int, int]]], list[int]]) -> None:
    """Check ``fn(ids, merges)``: encode one chunk's bytes with a list of learned merges.

    ``ids`` is a list of byte values (0..255); ``merges[r] = (left, right)`` is the merge of
    rank ``r``, whose new token has id ``256 + r``. The result is that of applying the merges in
    the order they were learned, each one replacing every occurrence of its pair, scanning left
    to right, without overlaps (``a a a`` with the merge ``(a, a)`` becomes ``aa a``); GPT-2's
    loop (merge the adjacent pair of lowest rank, repeat) gives the same, and so passes too.
    Return a new list (a tuple is accepted too).

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    a, b, c = ord("a"), ord("b"), ord("c")
    cases = [
        _Case(
            "one merge (a, b) in 'abcab'",
            ([a, b, c, a, b], [(a, b)]),
            hint="merge r replaces each occurrence of its pair by the one id 256 + r",
        ),
        _Case(
            "the pair (a, b) is not the pair (b, a)",
            ([b, a, b, a], [(a, b)]),
            hint="a merge joins its left token followed by its right token, not the reverse",
        ),
        _Case(
            "a merge that uses an earlier merge: (a, b) -> 256, then (256, c) -> 257",
            ([a, b, c, c, a, b], [(a, b), (256, c)]),
            hint="merge r creates the id 256 + r, and later merges may use it",
        ),
        _Case(
            "order matters: (b, c) is learned before (a, b), so 'abc' becomes a + bc",
            ([a, b, c], [(b, c), (a, b)]),
            hint="apply the merges in the order they were learned (lowest rank first), not in the "
            "order their pairs occur in the text",
        ),
        _Case(
            "overlapping occurrences: 'aaa' with the merge (a, a)",
            ([a, a, a], [(a, a)]),
            hint="after merging a pair, continue after it: the same token cannot be used twice",
        ),
        _Case("no merge applies", ([c, b, a], [(a, b), (256, c)])),
        _Case("an empty chunk", ([], [(a, b)])),
    ]
    _check_list("check_apply_merges", fn, cases, _apply_merges_reference, int)


# ---------------------------------------------------------------------------- longest match
class _ShortestFirst(set):
    """A set of strings that iterates over its members shortest first (then alphabetically).

    The checker's vocabularies are such sets, so that an answer which depends on the order of
    iteration (a regular expression ``"|".join(vocab)``, whose alternation takes the first
    alternative that matches) is judged the same way whatever ``PYTHONHASHSEED`` is."""

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set.__iter__(self), key=lambda piece: (len(piece), piece)))


def _longest_match_reference(word: str, vocab: set[str]) -> list[str]:
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while word[start:end] not in vocab:
            end -= 1
        pieces.append(word[start:end])
        start = end
    return pieces


def check_longest_match(fn: Callable[[str, set[str]], list[str]]) -> None:
    """Check ``fn(word, vocab)``: greedy longest-match-first segmentation (as in WordPiece).

    From the start of ``word``, take the longest piece that is in ``vocab``, then continue
    after it. Every single character of ``word`` is in ``vocab``, so a piece always exists.
    Return the pieces as a list of strings.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    letters = set("abcdeilnrtu")
    vocab = _ShortestFirst  # every vocabulary iterates shortest first, whatever the hash seed
    cases = [
        _Case("only single characters", ("cab", vocab(letters))),
        _Case(
            "prefer the longest piece at the start",
            ("unrelated", vocab(letters | {"un", "re", "relate"})),
            hint="at each position try the longest candidate first, then shorter ones",
        ),
        _Case(
            "left to right: 'abcd' with 'ab' and 'bcd' both known",
            ("abcd", vocab({"a", "b", "c", "d", "ab", "bcd"})),
            hint="match from the start of the word (left to right): the longest piece at the "
            "start, not the longest piece anywhere, nor from the end",
        ),
        _Case(
            "the whole word (12 characters) is one piece",
            ("interrelated", vocab(letters | {"interrelated", "inter", "related"})),
            hint="a piece may be as long as the whole word",
        ),
        _Case(
            "'ba' is known, 'ab' is not",
            ("abab", vocab({"a", "b", "ba"})),
            hint="a piece must match the characters in order",
        ),
        _Case("the empty word", ("", vocab(letters))),
    ]
    _check_list("check_longest_match", fn, cases, _longest_match_reference, str)


# ---------------------------------------------------------------------------- tied logits
def _tied_logits_reference(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return hidden.double() @ weight.double().T  # (B, T, d) @ (d, V) -> (B, T, V)


def _on_cpu(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, with a tensor result moved to the CPU (a learner may compute on the GPU)."""
    if not callable(fn):
        return fn  # _check refuses it with its own message

    def wrapped(*args: Any) -> Any:
        got = fn(*args)
        return got.cpu() if isinstance(got, torch.Tensor) else got

    return wrapped


def check_tied_logits(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(hidden, weight)``: output logits that reuse the embedding matrix.

    ``hidden`` has shape (B, T, d_model) and ``weight`` is an embedding matrix of shape
    (n_vocab, d_model), one row per token. Return the (B, T, n_vocab) scores of every position
    against every token's embedding: the logit of token v at position t is the dot product of
    ``hidden[b, t]`` with row ``v`` of ``weight``. The inputs are CPU tensors; a result on
    another device (computed on the GPU) is moved back before the comparison.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(2)
    cases = [
        _Case(
            "B=2, T=3, d_model=4, n_vocab=7",
            (torch.randn(2, 3, 4, generator=g), torch.randn(7, 4, generator=g)),
            hint="a logit is the plain dot product of hidden[b, t] with row v of weight: "
            "no softmax, no scaling",
        ),
        _Case(
            "B=1, T=5, d_model=6, n_vocab=3",
            (torch.randn(1, 5, 6, generator=g), torch.randn(3, 6, generator=g)),
            hint="multiply by the transpose of the (n_vocab, d_model) matrix",
        ),
        _Case(
            "B=1, T=1, d_model=4, n_vocab=6: a position equal to token 2's embedding",
            (torch.eye(4)[None, 2:3] * 5, torch.cat([torch.eye(4), torch.full((2, 4), 0.1)])),
        ),
    ]
    _check("check_tied_logits", _on_cpu(fn), cases, _tied_logits_reference)
