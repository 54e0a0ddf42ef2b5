"""Data for the book, all generated or shipped with installed packages: nothing is downloaded."""

from mtlib.data.bpe import BPETokenizer
from mtlib.data.synthetic import BOS, EOS, PAD, SequenceBatch, decode_symbols, sequence_task
from mtlib.data.translation import (
    NumberBatch,
    decode_words,
    encode_numbers,
    is_heldout,
    number_batch,
    number_to_words,
)

__all__ = [
    "BOS",
    "BPETokenizer",
    "EOS",
    "PAD",
    "SequenceBatch",
    "decode_symbols",
    "sequence_task",
    "NumberBatch",
    "decode_words",
    "encode_numbers",
    "is_heldout",
    "number_batch",
    "number_to_words",
]
