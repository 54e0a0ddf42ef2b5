"""A translation-like task generated offline: numbers 0-999,999 written as English words.

``"40519"`` -> ``"forty thousand five hundred nineteen"``: digits in, words out. The mapping is
short but not word-for-word: a ``1`` before another digit makes a *teen* word, zeros vanish,
``hundred`` and ``thousand`` are inserted, and the same digit becomes ``four``, ``forty`` or
``fourteen`` depending on where it stands. A model has to read several source positions to
write one word, and the right ones change from word to word.

Tokens (both vocabularies start with ``PAD=0, BOS=1, EOS=2`` like :mod:`mtlib.data.synthetic`):

- source: the digits ``0``-``9`` (ids 3-12), most significant first, right-padded;
- target: ``BOS`` + words + ``EOS``, right-padded; the words are :data:`WORDS` (ids 3-32).

**The held-out split.** Every number is either a training number or a held-out number, fixed
once by a hash of the number (:func:`is_heldout`: about 10% of the numbers from 100 up, at every
length). The numbers below 100 are the task's dictionary (each has its own words: "zero",
"fourteen", "sixty three") and are all in training. Training batches never contain a held-out
number. A held-out number such as 613,047 is a *new combination*: its blocks ``613`` and
``047`` occur in training numbers (in the same positions), never together.

Numbers are drawn by length first (1 to ``max_digits`` digits, uniformly), then uniformly
among the numbers of that length in the split, so that short numbers are not drowned by the
900,000 six-digit ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mtlib.data.synthetic import BOS, EOS, PAD

__all__ = [
    "WORDS",
    "SRC_TOKENS",
    "TGT_TOKENS",
    "NumberBatch",
    "number_to_words",
    "is_heldout",
    "number_batch",
    "encode_numbers",
    "decode_words",
]

_SPECIALS = ["<pad>", "<bos>", "<eos>"]
_ONES = "zero one two three four five six seven eight nine".split()
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
#: The target words, in id order (ids 3, 4, ...).
WORDS: list[str] = _ONES + _TEENS + _TENS + ["hundred", "thousand"]
#: Source token strings by id (specials, then the ten digits).
SRC_TOKENS: list[str] = _SPECIALS + [str(d) for d in range(10)]
#: Target token strings by id (specials, then :data:`WORDS`).
TGT_TOKENS: list[str] = _SPECIALS + WORDS
_WORD_ID = {w: i for i, w in enumerate(TGT_TOKENS)}
_FIRST_DIGIT = 3
MAX_NUMBER = 999_999
MAX_TGT_LEN = 11  # BOS + 9 words (777,777 is the longest kind) + EOS
_HELDOUT_SHARE = 10  # one number in ten is held out


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [_ONES[hundreds], "hundred"]
    if 10 <= rest < 20:
        words.append(_TEENS[rest - 10])
    else:
        tens, ones = divmod(rest, 10)
        if tens:
            words.append(_TENS[tens - 2])
        if ones:
            words.append(_ONES[ones])
    return words


def number_to_words(n: int) -> list[str]:
    """The English words of ``n`` (American style: no "and", no hyphens: one word per token).

    Args:
        n: an int in [0, 999_999].

    Returns:
        The words, e.g. ``number_to_words(40519) == ["forty", "thousand", "five", "hundred",
        "nineteen"]``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"n must be an int in [0, {MAX_NUMBER}], got {n!r}")
    if n == 0:
        return ["zero"]
    thousands, rest = divmod(n, 1000)
    words = _below_thousand(thousands) + ["thousand"] if thousands else []
    return words + _below_thousand(rest)


def is_heldout(numbers: Tensor) -> Tensor:
    """Whether each number belongs to the held-out split: about 1 in 10 from 100 up, by a
    fixed hash; never a number below 100 (those are the dictionary, all in training).

    Args:
        numbers: integer tensor of any shape, values in [0, 999_999].

    Returns:
        Bool tensor of the same shape.
    """
    if not isinstance(numbers, Tensor) or numbers.is_floating_point() or numbers.dtype == torch.bool:
        raise TypeError(f"numbers must be an integer tensor, got {numbers!r}"[:120])
    mixed = (numbers.long() * 2_654_435_761) % (2**32)  # Knuth's multiplicative hash
    return ((mixed >> 16) % _HELDOUT_SHARE == 0) & (numbers >= 100)


@dataclass
class NumberBatch:
    """A batch of the numbers-to-words task.

    Attributes:
        numbers: (B,) the numbers.
        src: (B, S) digit tokens, right-padded with PAD (S = the most digits in the batch).
        tgt: (B, T) ``BOS words EOS`` tokens, right-padded with PAD (T = the longest target).
    """

    numbers: Tensor
    src: Tensor
    tgt: Tensor

    def to(self, device: torch.device | str) -> NumberBatch:
        """The same batch on ``device``."""
        return NumberBatch(self.numbers.to(device), self.src.to(device), self.tgt.to(device))


def _block_table() -> tuple[Tensor, Tensor]:
    """Word ids of every block 0..999 (the empty list for 0), padded to 4: (1000, 4), (1000,)."""
    table = torch.full((1000, 4), PAD, dtype=torch.long)
    lengths = torch.zeros(1000, dtype=torch.long)
    for n in range(1, 1000):
        ids = [_WORD_ID[w] for w in _below_thousand(n)]
        table[n, : len(ids)] = torch.tensor(ids)
        lengths[n] = len(ids)
    return table, lengths


_BLOCKS, _BLOCK_LENGTHS = _block_table()


def _digit_count(numbers: Tensor) -> Tensor:
    """Number of decimal digits of each number (1 for 0): (B,)."""
    count = torch.ones_like(numbers)
    for power in range(1, 6):
        count += (numbers >= 10**power).long()
    return count


def encode_numbers(numbers: Tensor) -> NumberBatch:
    """Tokenise numbers into a :class:`NumberBatch` (source digits and target words).

    Vectorised: each target row is ``BOS, words(n // 1000), "thousand", words(n % 1000), EOS``
    with the parts that do not apply dropped (and ``zero`` for 0); a test checks it against
    :func:`number_to_words` for every number.

    Args:
        numbers: (B,) integer tensor of values in [0, 999_999].
    """
    if not isinstance(numbers, Tensor) or numbers.dim() != 1 or numbers.is_floating_point():
        raise ValueError(f"numbers must be a 1-D integer tensor, got {numbers!r}"[:120])
    numbers = numbers.long().cpu()
    if len(numbers) and not 0 <= int(numbers.min()) <= int(numbers.max()) <= MAX_NUMBER:
        raise ValueError(
            f"numbers must lie in [0, {MAX_NUMBER}], got min {int(numbers.min())}, max {int(numbers.max())}"
        )
    batch = len(numbers)
    count = _digit_count(numbers)  # (B,)
    width = int(count.max()) if batch else 1
    j = torch.arange(width)  # digit position from the left
    power = (count[:, None] - 1 - j[None, :]).clamp(min=0)  # (B, S)
    digits = numbers[:, None] // 10**power % 10  # (B, S)
    src = torch.where(j[None, :] < count[:, None], _FIRST_DIGIT + digits, PAD)  # (B, S)

    high, low = numbers // 1000, numbers % 1000  # (B,) each
    column = lambda value: torch.full((batch, 1), value, dtype=torch.long)  # noqa: E731
    candidates = torch.cat(  # (B, 11): every token the row could hold, in order
        [column(BOS), _BLOCKS[high], column(_WORD_ID["thousand"]), _BLOCKS[low], column(EOS)], dim=1
    )
    k = torch.arange(4)[None, :]
    keep = torch.cat(  # (B, 11): which candidates this number uses
        [
            torch.ones(batch, 1, dtype=torch.bool),
            k < _BLOCK_LENGTHS[high][:, None],
            (high > 0)[:, None],
            k < _BLOCK_LENGTHS[low][:, None],
            torch.ones(batch, 1, dtype=torch.bool),
        ],
        dim=1,
    )
    zero = numbers == 0
    candidates[zero, 1], keep[zero, 1] = _WORD_ID["zero"], True
    order = torch.sort((~keep).long(), dim=1, stable=True).indices  # kept tokens first, in order
    tgt = torch.gather(candidates.masked_fill(~keep, PAD), 1, order)  # (B, 11)
    tgt = tgt[:, : int(keep.sum(1).max()) if batch else 2]  # (B, T)
    return NumberBatch(numbers.clone(), src, tgt)


def number_batch(
    n: int,
    *,
    split: str = "train",
    min_digits: int | None = None,
    max_digits: int = 6,
    generator: torch.Generator | None = None,
) -> NumberBatch:
    """Draw ``n`` numbers of one split: a length uniformly in [min_digits, max_digits], then a
    number of that length uniformly among the split's numbers.

    Args:
        n: batch size (>= 1).
        split: ``"train"`` or ``"heldout"``.
        min_digits: fewest digits; default 1 for ``"train"``, 3 for ``"heldout"`` (the
            held-out split has no number below 100).
        max_digits: most digits (<= 6).
        generator: a seeded ``torch.Generator`` for reproducible batches.

    Returns:
        A :class:`NumberBatch`.
    """
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if min_digits is None:
        min_digits = 1 if split == "train" else 3
    if not (1 if split == "train" else 3) <= min_digits <= max_digits <= 6:
        raise ValueError(
            f"digits must satisfy 1 <= min_digits <= max_digits <= 6 (3 <= min_digits for the "
            f"held-out split), got min_digits={min_digits}, max_digits={max_digits}"
        )
    lengths = torch.randint(min_digits, max_digits + 1, (n,), generator=generator)  # (n,)
    low = torch.where(lengths == 1, 0, 10 ** (lengths - 1))  # (n,) smallest number of each length
    high = 10**lengths  # (n,) one past the largest
    numbers = torch.empty(n, dtype=torch.long)
    todo = torch.ones(n, dtype=torch.bool)
    while todo.any():  # rejection sampling: redraw the numbers that fell in the other split
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        draw = low + (u * (high - low)).long().clamp(max=(high - low - 1))  # (n,)
        numbers = torch.where(todo, draw, numbers)
        todo = is_heldout(numbers) != (split == "heldout")
    return encode_numbers(numbers)


def decode_words(tokens: Tensor) -> str:
    """One row of target tokens as text, stopping at EOS, e.g. ``'forty thousand five'``.

    Args:
        tokens: (T,) target token ids; a leading BOS and anything after EOS are dropped.
    """
    if not isinstance(tokens, Tensor) or tokens.dim() != 1:
        raise ValueError(f"tokens must be a 1-D tensor, got {tokens!r}"[:120])
    words = []
    for t in tokens.tolist():
        if t == EOS:
            break
        if t not in (BOS, PAD):
            words.append(TGT_TOKENS[t] if 0 <= t < len(TGT_TOKENS) else f"<{t}>")
    return " ".join(words)
