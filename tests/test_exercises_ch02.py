"""Chapter 2's self-checks: correct solutions pass, typical mistakes get the intended message."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises
from mtlib.data import BPETokenizer


def good_apply_merges(ids, merges):
    for rank, pair in enumerate(merges):
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
                out.append(256 + rank)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


def library_apply_merges(ids, merges):
    # A correct variant: mtlib's tokenizer on the same bytes (ids are ASCII in every case).
    return BPETokenizer(merges).encode(bytes(ids).decode("ascii")) if ids else []


def tuple_apply_merges(ids, merges):
    # Correct, returning a tuple like the chapter's own merge() does.
    return tuple(good_apply_merges(ids, merges))


def good_longest_match(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        end = max(e for e in range(start + 1, len(word) + 1) if word[start:e] in vocab)
        pieces.append(word[start:end])
        start = end
    return pieces


def good_tied_logits(hidden, weight):
    return hidden @ weight.T


def einsum_tied_logits(hidden, weight):
    return torch.einsum("btd,vd->btv", hidden, weight)


def linear_tied_logits(hidden, weight):
    return F.linear(hidden, weight)


@pytest.mark.parametrize(
    "checker, solution, cases",
    [
        (exercises.check_apply_merges, good_apply_merges, 7),
        (exercises.check_apply_merges, library_apply_merges, 7),
        (exercises.check_apply_merges, tuple_apply_merges, 7),
        (exercises.check_longest_match, good_longest_match, 6),
        (exercises.check_tied_logits, good_tied_logits, 3),
        (exercises.check_tied_logits, einsum_tied_logits, 3),
        (exercises.check_tied_logits, linear_tied_logits, 3),
    ],
)
def test_correct_solutions_pass_and_say_so(checker, solution, cases, capsys):
    assert checker(solution) is None
    assert capsys.readouterr().out.strip() == f"{checker.__name__}: all {cases} cases passed."


def merges_in_text_order(ids, merges):
    # Wrong: at each step merge whichever known pair comes first in the text.
    ranks = {tuple(p): r for r, p in enumerate(merges)}
    ids = list(ids)
    changed = True
    while changed:
        changed = False
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) in ranks:
                ids[i : i + 2] = [256 + ranks[(ids[i], ids[i + 1])]]
                changed = True
                break
    return ids


def merges_both_orders(ids, merges):
    # Wrong: treats (a, b) and (b, a) as the same pair.
    for rank, (x, y) in enumerate(merges):
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and {ids[i], ids[i + 1]} == {x, y}:
                out.append(256 + rank)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


def merges_right_to_left(ids, merges):
    # Wrong: scans from the end, so 'aaa' with (a, a) becomes a + aa instead of aa + a.
    reversed_merges = [(y, x) for x, y in merges]
    return good_apply_merges(ids[::-1], reversed_merges)[::-1]


def merges_ids_from_zero(ids, merges):
    # Wrong: numbers new tokens 0, 1, ... (colliding with bytes) instead of 256, 257, ...
    return [t - 256 if t >= 256 else t for t in good_apply_merges(ids, merges)]


def merges_in_place(ids, merges):
    result = good_apply_merges(ids, merges)
    ids.clear()
    ids.extend(result)
    return result


def shortest_match(word, vocab):
    return list(word)


def longest_match_from_the_end(word, vocab):
    pieces, end = [], len(word)
    while end > 0:
        start = min(s for s in range(end) if word[s:end] in vocab)
        pieces.insert(0, word[start:end])
        end = start
    return pieces


def longest_match_as_string(word, vocab):
    return " ".join(good_longest_match(word, vocab))


@pytest.mark.parametrize(
    "checker, bad, match",
    [
        (exercises.check_apply_merges, merges_in_text_order, r"case 4 of 7 \(order matters.*\nHint: apply the merges in the order they were learned"),
        (exercises.check_apply_merges, merges_both_orders, r"case 2 of 7 \(the pair \(a, b\) is not the pair \(b, a\).*\nHint: a merge joins its left token"),
        (exercises.check_apply_merges, merges_right_to_left, r"case 5 of 7 \(overlapping.*\nHint: after merging a pair"),
        (exercises.check_apply_merges, merges_ids_from_zero, r"case 1 of 7 .*first difference is at position 0.*\nHint: merge r replaces .* 256 \+ r"),
        (exercises.check_apply_merges, merges_in_place, r"changed its input list in place"),
        (exercises.check_apply_merges, lambda ids, merges: 1 / 0, r"case 1 of 7 .*raised ZeroDivisionError"),
        (exercises.check_longest_match, shortest_match, r"case 2 of 6 \(prefer the longest.*\nHint: at each position try the longest"),
        (exercises.check_longest_match, longest_match_from_the_end, r"case 3 of 6 \(left to right.*\nHint: match from the start"),
        (exercises.check_longest_match, longest_match_as_string, r"case 1 of 6 .*expected a list of str, got str"),
        (exercises.check_tied_logits, lambda h, w: h @ w, r"case 1 of 3 .*raised RuntimeError"),
        (exercises.check_tied_logits, lambda h, w: (h @ w.T).transpose(1, 2), r"case 1 of 3 .*expected output shape \(2, 3, 7\), got \(2, 7, 3\)"),
        (exercises.check_tied_logits, lambda h, w: torch.softmax(h @ w.T, -1), r"case 1 of 3 .*values differ.*\nHint: .*no softmax"),
        (exercises.check_tied_logits, lambda h, w: h @ w.T / h.shape[-1] ** 0.5, r"case 1 of 3 .*values differ.*\nHint: .*no scaling"),
    ],
)
def test_mistakes_get_a_diagnostic_naming_the_case(checker, bad, match):
    with pytest.raises(AssertionError, match=match):
        checker(bad)


def test_checkers_refuse_something_that_is_not_a_function():
    for checker in (exercises.check_apply_merges, exercises.check_longest_match, exercises.check_tied_logits):
        with pytest.raises(TypeError, match="takes your function"):
            checker([1, 2, 3])
