"""The byte-level BPE tokenizer of chapter 2: round trips, merge order, training, bad input."""

import random
from collections import Counter

import pytest

from mtlib.data import BPETokenizer
from mtlib.data.bpe import pretokenize

CORPUS = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away!\n"
    "    def lower(x):  # indented code, with   runs of spaces\n"
    "        return x.lower()  \t\n"
    "Numbers 12345 and 2026, under_scores and CamelCase, lowest lower low.\n"
) * 30

STRINGS = [
    "",
    " ",
    "   \n\n\t  \r\n",
    "hello world",
    "注意力就是你所需要的一切。",  # a Chinese sentence: 3 bytes per character in UTF-8
    "emoji 🙂👍🏽 and flags 🇫🇷",  # 4-byte characters and a skin-tone modifier
    "ünïcödé façade naïve — “quotes” ½ ² ß",
    "tabs\tand\nnewlines\n\n",
    "\x00\x01 control \x7f characters",
    "mixed 中文 and English, 123 numbers_and_underscores!!!",
    "\ud800 a lone surrogate",
]


@pytest.fixture(scope="module")
def tok():
    return BPETokenizer.train(CORPUS, vocab_size=350)


def naive_train(text, num_merges):
    """The notebook's version: recount every pair after every merge (slow, obviously right)."""
    words = {tuple(chunk.encode("utf-8")): n for chunk, n in Counter(pretokenize(text)).items()}
    merges = []
    for step in range(num_merges):
        counts = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:], strict=False):
                counts[pair] += n
        if not counts or max(counts.values()) < 2:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        new_words = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(256 + step)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] = n
        words = new_words
    return merges


@pytest.mark.parametrize("text", STRINGS, ids=range(len(STRINGS)))
def test_decode_inverts_encode_for_any_string(tok, text):
    ids = tok.encode(text)
    assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert "".join(pretokenize(text)) == text


def test_round_trip_on_random_unicode(tok):
    rng = random.Random(0)
    for _ in range(200):
        text = "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x2FFF), rng.randrange(0x1F300, 0x1FAFF)])) for _ in range(rng.randrange(0, 30)))
        assert tok.decode(tok.encode(text)) == text


def test_empty_string_and_untrained_tokenizer_use_bytes():
    assert BPETokenizer().encode("") == []
    assert BPETokenizer().encode("aé") == [97, 0xC3, 0xA9]
    assert BPETokenizer().vocab_size == 256


def test_the_first_merges_of_a_tiny_corpus_are_the_hand_computed_ones():
    # Chunks: "low" x1, " low" x4, " lower" x2, " newest" x6, " widest" x3.
    # Pair counts: (e, s) = 6 + 3 = 9 and (s, t) = 9 tie; ties go to the smaller pair, (e, s).
    # Then (es, t) = 9. Then (l, o) = (o, w) = 7 tie -> (l, o), then (lo, w) = 7.
    text = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)
    tok = BPETokenizer.train(text, vocab_size=260)
    e, s, t, el, o, w = (ord(ch) for ch in "estlow")
    assert tok.merges == [(e, s), (256, t), (el, o), (258, w)]
    assert tok.vocab[256:] == [b"es", b"est", b"lo", b"low"]
    assert tok.tokens(" lowest") == [" ", "low", "est"]


def test_incremental_training_equals_the_naive_recount():
    text = CORPUS[:3000] + "aaaa bbbb aaaa abab baba " * 5
    tok = BPETokenizer.train(text, vocab_size=256 + 120)
    assert tok.merges == naive_train(text, 120)


def test_merges_apply_in_learned_order_not_in_text_order():
    a, b, c = ord("a"), ord("b"), ord("c")
    assert BPETokenizer([(a, b), (b, c)]).encode("abc") == [256, c]
    assert BPETokenizer([(b, c), (a, b)]).encode("abc") == [a, 256]
    # a later merge may use an earlier one; overlapping pairs merge left to right
    assert BPETokenizer([(a, a), (256, a)]).encode("aaaaa") == [256, 257]  # aa aa a -> aa aaa


def test_encode_equals_applying_every_merge_in_rank_order(tok):
    for text in ["the lowest fox", "CamelCase under_scores 2026", "    return x.lower()"]:
        expected = []
        for chunk in pretokenize(text):
            ids = list(chunk.encode("utf-8"))
            for rank, pair in enumerate(tok.merges):
                out, i = [], 0
                while i < len(ids):
                    if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                        out.append(256 + rank)
                        i += 2
                    else:
                        out.append(ids[i])
                        i += 1
                ids = out
            expected += ids
        assert tok.encode(text) == expected


def test_training_is_deterministic_and_a_prefix_of_merges_is_a_smaller_tokenizer(tok):
    again = BPETokenizer.train(CORPUS, vocab_size=350)
    assert again.merges == tok.merges
    small = BPETokenizer.train(CORPUS, vocab_size=300)
    assert small.merges == tok.merges[:44]
    assert len(small.encode(CORPUS)) > len(tok.encode(CORPUS))


def test_vocab_size_is_respected_and_training_stops_when_no_pair_repeats(tok):
    assert tok.vocab_size == 350 and len(tok.merges) == 94 and len(tok.vocab) == 350
    assert max(tok.encode(CORPUS)) == 349
    assert BPETokenizer.train(CORPUS, vocab_size=10_000).vocab_size < 10_000  # ran out of pairs
    assert BPETokenizer.train(CORPUS, vocab_size=256).merges == []
    few = BPETokenizer.train("abcabc", vocab_size=1000)  # only (a,b), then (ab,c) repeat
    assert few.vocab_size == 258 and few.encode("abcabc") == [257, 257]
    assert BPETokenizer.train("abcabc", vocab_size=1000, min_count=1).vocab_size == 259


def test_merged_tokens_stand_for_the_bytes_of_their_parts(tok):
    for rank, (left, right) in enumerate(tok.merges):
        assert tok.vocab[256 + rank] == tok.vocab[left] + tok.vocab[right]
        assert left < 256 + rank and right < 256 + rank
    rebuilt = BPETokenizer(tok.merges)
    assert rebuilt.vocab == tok.vocab and rebuilt.encode(CORPUS[:500]) == tok.encode(CORPUS[:500])


def test_compression_beats_bytes_on_text_like_the_training_text(tok):
    text = "The lazy fox jumps over the quick brown dog. " * 3
    assert len(tok.encode(text)) < 0.5 * len(text.encode("utf-8"))


def test_decode_of_a_cut_character_shows_the_replacement_character():
    ids = BPETokenizer().encode("é")  # two bytes
    assert BPETokenizer().decode(ids[:1]) == "\ufffd"


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: BPETokenizer.train(b"bytes", vocab_size=300), TypeError, r"text must be a str, got bytes"),
        (lambda: BPETokenizer.train("abc", vocab_size=100), ValueError, r"vocab_size must be >= 256, got 100"),
        (lambda: BPETokenizer.train("abc", vocab_size=300.0), TypeError, r"vocab_size must be an int, got float"),
        (lambda: BPETokenizer.train("abc", vocab_size=300, min_count=0), ValueError, r"min_count must be >= 1"),
        (lambda: BPETokenizer().encode(["a"]), TypeError, r"text must be a str, got list"),
        (lambda: BPETokenizer().decode([97, 256]), ValueError, r"ids must lie in \[0, 256\), got 256"),
        (lambda: BPETokenizer().decode([97, -1]), ValueError, r"ids must lie in \[0, 256\), got -1"),
        (lambda: BPETokenizer().decode([97.0]), TypeError, r"ids must hold ints, got float"),
        (lambda: BPETokenizer().decode("ab"), TypeError, r"ids must be a sequence of ints, got str"),
        (lambda: BPETokenizer([(97, 300)]), ValueError, r"merges\[0\] = \(97, 300\) uses an id outside \[0, 256\)"),
        (lambda: BPETokenizer([(97, 98), (256, 257)]), ValueError, r"merges\[1\] .* outside \[0, 257\)"),
        (lambda: BPETokenizer([(97, 98, 99)]), TypeError, r"merges\[0\] must be a pair of ints"),
        (lambda: BPETokenizer("ab"), TypeError, r"merges must be a sequence of \(int, int\) pairs, got str"),
        (lambda: pretokenize(None), TypeError, r"text must be a str, got NoneType"),
    ],
)
def test_bad_input_is_refused_with_a_message_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
