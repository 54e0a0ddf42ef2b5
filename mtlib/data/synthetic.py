"""Synthetic sequence-to-sequence tasks: copy, reverse, sort.

Tokens: ``PAD=0``, ``BOS=1``, ``EOS=2``, then the symbols ``3 .. 3 + num_symbols - 1``.
Sources are padded on the right; targets are ``BOS y_1 .. y_n EOS`` padded on the right.
Every example is drawn from a ``torch.Generator`` so a seed reproduces the same data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PAD, BOS, EOS = 0, 1, 2
_FIRST_SYMBOL = 3
_KINDS = ("copy", "reverse", "sort")


@dataclass
class SequenceBatch:
    """A batch of a synthetic task.

    Attributes:
        src: (n, T) source tokens, right-padded with PAD.
        lengths: (n,) number of real tokens in each source.
        tgt: (n, T + 2) target tokens ``BOS y EOS``, right-padded with PAD.
        num_symbols: number of distinct symbols of the task.
    """

    src: torch.Tensor
    lengths: torch.Tensor
    tgt: torch.Tensor
    num_symbols: int

    @property
    def vocab_size(self) -> int:
        """Size of the task's vocabulary (PAD, BOS, EOS and every symbol, seen in this batch or not)."""
        return _FIRST_SYMBOL + self.num_symbols


def sequence_task(
    n: int,
    min_len: int,
    max_len: int,
    *,
    kind: str = "reverse",
    num_symbols: int = 10,
    generator: torch.Generator | None = None,
) -> SequenceBatch:
    """Draw ``n`` examples of a copy / reverse / sort task with lengths in [min_len, max_len].

    Args:
        n: number of examples (>= 1).
        min_len: shortest source length (>= 1).
        max_len: longest source length (>= min_len).
        kind: ``"copy"``, ``"reverse"`` or ``"sort"``.
        num_symbols: number of distinct symbols (>= 2); the vocabulary is ``3 + num_symbols``.
        generator: a seeded ``torch.Generator`` for reproducible data.

    Returns:
        A :class:`SequenceBatch`; the padded length T is the longest length drawn.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    if n < 1 or num_symbols < 2:
        raise ValueError(
            f"n must be >= 1 and num_symbols >= 2, got n={n}, num_symbols={num_symbols}"
        )
    if not 1 <= min_len <= max_len:
        raise ValueError(
            f"lengths must satisfy 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}"
        )
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator)  # (n,)
    T = int(lengths.max())
    symbols = torch.randint(
        _FIRST_SYMBOL, _FIRST_SYMBOL + num_symbols, (n, T), generator=generator
    )  # (n, T)
    real = torch.arange(T)[None, :] < lengths[:, None]  # (n, T) True on real tokens
    src = symbols.masked_fill(~real, PAD)
    if kind == "copy":
        out = src
    elif kind == "reverse":
        mirror = (lengths[:, None] - 1 - torch.arange(T)[None, :]).clamp(
            min=0
        )  # (n, T) index of the mirror
        out = torch.gather(symbols, 1, mirror).masked_fill(~real, PAD)
    else:  # sort: padding sorts last when replaced by a large value
        out = (
            src.masked_fill(~real, torch.iinfo(src.dtype).max)
            .sort(dim=1)
            .values.masked_fill(~real, PAD)
        )
    tgt = torch.full((n, T + 2), PAD, dtype=src.dtype)
    tgt[:, 0] = BOS
    tgt[:, 1 : T + 1] = out
    tgt[torch.arange(n), lengths + 1] = EOS
    return SequenceBatch(src=src, lengths=lengths, tgt=tgt, num_symbols=num_symbols)


def decode_symbols(tokens: torch.Tensor) -> str:
    """Turn one row of tokens into a readable string, e.g. ``'<s> 3 1 4 </s>'`` (symbols as digits).

    Args:
        tokens: (T,) integer tokens.
    """
    if tokens.dim() != 1:
        raise ValueError(f"tokens must have shape (T,), got {tuple(tokens.shape)}")
    names = {PAD: "_", BOS: "<s>", EOS: "</s>"}
    return " ".join(names.get(int(t), str(int(t) - _FIRST_SYMBOL)) for t in tokens)
