"""Chapter 2's self-checks: correct solutions pass, typical mistakes get the intended message."""

import os
import re
import subprocess
import sys

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


def sorted_regex_longest_match(word, vocab):
    # Correct: a regular expression whose alternatives are tried longest first.
    return re.findall("|".join(map(re.escape, sorted(vocab, key=len, reverse=True))), word)


def recursive_longest_match(word, vocab):
    # Correct: the longest known prefix, then the same on the rest.
    if not word:
        return []
    end = next(e for e in range(len(word), 0, -1) if word[:e] in vocab)
    return [word[:end], *recursive_longest_match(word[end:], vocab)]


def rank_min_apply_merges(ids, merges):
    # Correct, GPT-2's way: merge the adjacent pair learned first, until no pair is a merge.
    ranks = {tuple(p): r for r, p in enumerate(merges)}
    ids = list(ids)
    while len(ids) > 1:
        pairs = [(ranks.get((a, b), len(merges)), i) for i, (a, b) in enumerate(zip(ids[:-1], ids[1:], strict=True))]
        rank, i = min(pairs)
        if rank == len(merges):
            break
        ids[i : i + 2] = [256 + rank]
    return ids


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
        (exercises.check_apply_merges, rank_min_apply_merges, 7),
        (exercises.check_longest_match, good_longest_match, 6),
        (exercises.check_longest_match, sorted_regex_longest_match, 6),
        (exercises.check_longest_match, recursive_longest_match, 6),
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


def longest_piece_anywhere(word, vocab):
    # Wrong (MaxMatch by length): the longest known piece anywhere in the word, then both sides.
    if not word:
        return []
    s, e = max(
        ((s, e) for s in range(len(word)) for e in range(s + 1, len(word) + 1) if word[s:e] in vocab),
        key=lambda se: (se[1] - se[0], -se[0]),
    )
    return [*longest_piece_anywhere(word[:s], vocab), word[s:e], *longest_piece_anywhere(word[e:], vocab)]


def longest_match_capped(word, vocab, cap=6):
    # Wrong: never tries a piece longer than 6 characters.
    pieces, start = [], 0
    while start < len(word):
        end = min(len(word), start + cap)
        while word[start:end] not in vocab:
            end -= 1
        pieces.append(word[start:end])
        start = end
    return pieces


def unsorted_regex_longest_match(word, vocab):
    # Wrong: a regular expression's alternation takes the first alternative that matches, so
    # the order of the set decides (it used to pass for one PYTHONHASHSEED in twelve).
    return re.findall("|".join(map(re.escape, vocab)), word)


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
        (exercises.check_longest_match, longest_piece_anywhere, r"case 3 of 6 \(left to right.*\nHint: match from the start"),
        (exercises.check_longest_match, longest_match_capped, r"case 4 of 6 \(the whole word \(12 characters\).*\nHint: a piece may be as long"),
        (exercises.check_longest_match, unsorted_regex_longest_match, r"case 2 of 6 \(prefer the longest.*\nHint: at each position try the longest"),
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


def test_longest_match_verdict_does_not_depend_on_the_hash_seed():
    # Sets of strings iterate in an order that PYTHONHASHSEED decides; the checker's
    # vocabularies iterate shortest first, so an order-dependent answer fails on every seed.
    code = (
        "import re\nfrom mtlib import exercises\n"
        "def f(word, vocab):\n    return re.findall('|'.join(map(re.escape, vocab)), word)\n"
        "try:\n    exercises.check_longest_match(f)\nexcept AssertionError as e:\n    print('rejected', str(e)[:40])\n"
    )
    for seed in ("0", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert done.stdout.startswith("rejected check_longest_match failed on case 2"), (seed, done.stdout, done.stderr)
