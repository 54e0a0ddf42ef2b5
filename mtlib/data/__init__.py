"""Data for the book, all generated or shipped with installed packages: nothing is downloaded."""

from mtlib.data.bpe import BPETokenizer
from mtlib.data.synthetic import BOS, EOS, PAD, SequenceBatch, decode_symbols, sequence_task

__all__ = ["BOS", "BPETokenizer", "EOS", "PAD", "SequenceBatch", "decode_symbols", "sequence_task"]
