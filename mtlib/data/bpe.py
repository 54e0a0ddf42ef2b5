"""A small byte-level byte-pair-encoding (BPE) tokenizer, trained in chapter 2.

BPE {Gage 1994; Sennrich et al. 2016} starts from a base vocabulary and repeatedly *merges*
the most frequent pair of adjacent tokens into a new token. Here the base vocabulary is the
256 possible bytes (as in GPT-2), so every string, in any script, with emoji or control
characters, can be encoded: there is no unknown token, and ``decode(encode(s)) == s``.

The pipeline:

1. **Pre-tokenize**: :func:`pretokenize` cuts text into chunks (a word with its leading space,
   a number, a run of punctuation, a run of whitespace). Merges never cross a chunk boundary,
   so a token never glues the end of one word to the start of the next.
2. **Train** (:meth:`BPETokenizer.train`): count the chunks once; then, merge after merge,
   pick the most frequent adjacent pair (ties: the smallest pair of ids), give it the next id
   (256, 257, ...), and update the pair counts only in the chunks that contain the pair.
3. **Encode** (:meth:`BPETokenizer.encode`): turn each chunk into bytes and apply the learned
   merges in the order they were learned (lowest rank first).
4. **Decode** (:meth:`BPETokenizer.decode`): concatenate the bytes of the tokens and read them
   as UTF-8.

Example:
    >>> tok = BPETokenizer.train("low lower lowest " * 20, vocab_size=260)
    >>> tok.vocab_size
    260
    >>> tok.decode(tok.encode("lowest 最低 🙂")) == "lowest 最低 🙂"
    True
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

__all__ = ["BPETokenizer", "PRETOKENIZE_PATTERN", "pretokenize"]

#: Chunks that merges never cross, each an optional space followed by letters, or by digits, or
#: by other symbols, or a run of whitespace. Every character falls in exactly one class, so the chunks
#: of a text always join back to the text.
PRETOKENIZE_PATTERN = re.compile(r" ?[^\W\d_]+| ?\d+| ?(?:_|[^\w\s])+|\s+(?!\S)|\s+")

_NUM_BYTES = 256
_ENCODING = "utf-8"
_ERRORS = "surrogatepass"  # lone surrogates ("\ud800") are valid str, so they round-trip too


def pretokenize(text: str) -> list[str]:
    """Cut ``text`` into the chunks that BPE merges within (GPT-2 style, simplified).

    Args:
        text: any string.

    Returns:
        The chunks, in order; ``"".join(pretokenize(text)) == text``.

    Example:
        >>> pretokenize("The cat's 2 hats!")
        ['The', ' cat', "'", 's', ' 2', ' hats', '!']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return PRETOKENIZE_PATTERN.findall(text)


def _merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids``, scanning left to right, by ``new_id``."""
    out: list[int] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _pairs(ids: Sequence[int]) -> Iterable[tuple[int, int]]:
    return zip(ids, ids[1:], strict=False)


class BPETokenizer:
    """Byte-level BPE: 256 byte tokens plus one token per learned merge.

    Token ``i < 256`` is the byte ``i``; token ``256 + r`` is the merge of rank ``r``,
    ``merges[r] = (left, right)``, whose bytes are the bytes of ``left`` then those of
    ``right``.

    Args:
        merges: the learned merges in order, each a pair of token ids; merge ``r`` may only
            use ids below ``256 + r``. Usually you get them from :meth:`train`; a prefix
            ``merges[:k]`` is again a valid tokenizer (the one after ``k`` merges).

    Attributes:
        merges: list of ``(left, right)`` id pairs, in the order they were learned.
        vocab: ``vocab[i]`` is the ``bytes`` that token ``i`` stands for.
    """

    def __init__(self, merges: Sequence[tuple[int, int]] = ()) -> None:
        if isinstance(merges, (str, bytes)) or not isinstance(merges, Sequence):
            raise TypeError(
                f"merges must be a sequence of (int, int) pairs, got {type(merges).__name__}"
            )
        self.merges: list[tuple[int, int]] = []
        self.vocab: list[bytes] = [bytes([b]) for b in range(_NUM_BYTES)]
        for rank, pair in enumerate(merges):
            if (
                not isinstance(pair, Sequence)
                or len(pair) != 2
                or not all(isinstance(t, int) and not isinstance(t, bool) for t in pair)
            ):
                raise TypeError(f"merges[{rank}] must be a pair of ints, got {pair!r}")
            left, right = pair
            if not (0 <= left < len(self.vocab) and 0 <= right < len(self.vocab)):
                raise ValueError(
                    f"merges[{rank}] = {tuple(pair)} uses an id outside [0, {len(self.vocab)}): "
                    "a merge may only combine bytes and earlier merges"
                )
            self.merges.append((left, right))
            self.vocab.append(self.vocab[left] + self.vocab[right])
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        """Number of token ids (256 bytes plus one per merge)."""
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, text: str, vocab_size: int, *, min_count: int = 2) -> BPETokenizer:
        """Learn merges from ``text`` until the vocabulary has ``vocab_size`` tokens.

        Each step merges the most frequent adjacent pair of tokens, counted over the chunks of
        :func:`pretokenize` weighted by how often each chunk occurs; ties go to the smallest
        pair ``(left, right)``. Training stops early when no pair occurs ``min_count`` times.

        Args:
            text: the training corpus.
            vocab_size: the largest vocabulary wanted, >= 256 (256 means no merges).
            min_count: the least number of occurrences a pair needs to be merged, >= 1.

        Returns:
            The trained tokenizer; ``vocab_size`` <= the requested size.

        Raises:
            TypeError: if ``text`` is not a str or a size is not an int.
            ValueError: if ``vocab_size < 256`` or ``min_count < 1``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        for name, value, low in (
            ("vocab_size", vocab_size, _NUM_BYTES),
            ("min_count", min_count, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")

        # Each distinct chunk once, as a list of byte ids, with how often it occurs.
        chunk_counts = Counter(pretokenize(text))
        words = [list(chunk.encode(_ENCODING, _ERRORS)) for chunk in chunk_counts]
        freqs = list(chunk_counts.values())

        # Pair counts over all chunks, and which chunks contain each pair.
        counts: Counter[tuple[int, int]] = Counter()
        where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
        for w, (ids, freq) in enumerate(zip(words, freqs, strict=True)):
            for pair in _pairs(ids):
                counts[pair] += freq
                where[pair].add(w)
        # A max-heap of (-count, pair) with lazy deletion: stale entries are skipped on pop.
        heap = [(-c, pair) for pair, c in counts.items()]
        heapq.heapify(heap)

        merges: list[tuple[int, int]] = []
        while _NUM_BYTES + len(merges) < vocab_size and heap:
            negative, pair = heapq.heappop(heap)
            if counts.get(pair, 0) != -negative:
                continue  # stale: this pair's count changed after the entry was pushed
            if -negative < min_count:
                break
            new_id = _NUM_BYTES + len(merges)
            merges.append(pair)
            changed: set[tuple[int, int]] = set()
            for w in where.pop(pair):
                ids, freq = words[w], freqs[w]
                for old in _pairs(ids):  # remove this chunk's old pairs ...
                    counts[old] -= freq
                    changed.add(old)
                ids = words[w] = _merge(ids, pair, new_id)
                for new in _pairs(ids):  # ... and add its new ones
                    counts[new] += freq
                    where[new].add(w)
                    changed.add(new)
            for p in changed:
                if counts[p] > 0:
                    heapq.heappush(heap, (-counts[p], p))
                else:
                    del counts[p]
            counts.pop(pair, None)
        return cls(merges)

    # ------------------------------------------------------------------ encoding
    def _encode_chunk(self, chunk: str) -> list[int]:
        if chunk in self._cache:
            return self._cache[chunk]
        ids = list(chunk.encode(_ENCODING, _ERRORS))
        while len(ids) > 1:
            # The adjacent pair that was learned first; merges apply in learned order.
            pair = min(_pairs(ids), key=lambda p: self._ranks.get(p, len(self._ranks)))
            if pair not in self._ranks:
                break
            ids = _merge(ids, pair, _NUM_BYTES + self._ranks[pair])
        self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Turn ``text`` into token ids.

        Args:
            text: any string (any script, emoji, whitespace, the empty string).

        Returns:
            Token ids in ``[0, vocab_size)``; ``decode(encode(text)) == text``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids: list[int] = []
        for chunk in pretokenize(text):
            ids.extend(self._encode_chunk(chunk))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Turn token ids back into text.

        Args:
            ids: token ids in ``[0, vocab_size)`` (a list, or a 1-d tensor's ``.tolist()``).

        Returns:
            The text. Ids that do not come from :meth:`encode` may cut a character's UTF-8
            bytes in half; such bytes are shown as the replacement character U+FFFD.

        Raises:
            TypeError: if an id is not an int.
            ValueError: if an id is outside ``[0, vocab_size)``.
        """
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"ids must be a sequence of ints, got {type(ids).__name__}")
        pieces = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"ids must hold ints, got {type(i).__name__} {i!r}")
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {i}")
            pieces.append(self.vocab[i])
        data = b"".join(pieces)
        try:
            return data.decode(_ENCODING, _ERRORS)
        except UnicodeDecodeError:
            return data.decode(_ENCODING, "replace")

    def tokens(self, text: str) -> list[str]:
        """The pieces of ``text`` that the tokens stand for, for display.

        A token that holds part of a character's bytes shows as U+FFFD.

        Example:
            >>> BPETokenizer().tokens("hi")
            ['h', 'i']
        """
        return [self.vocab[i].decode(_ENCODING, "replace") for i in self.encode(text)]
