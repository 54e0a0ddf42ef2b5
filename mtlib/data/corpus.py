"""The book's one text corpus: Python's ``help()`` topics, as Python 3.11.7 ships them.

Chapters 2, 9, 10, 13 and 14 train on ``pydoc_data.topics`` (the text ``help("if")`` prints). That
module is rewritten with every Python release: 3.11.2 and 3.11.7 already differ by about a
thousand characters, and Colab runs another minor version, so reading it from the running Python
would give another text, another validation split, other printed numbers, and a character
vocabulary that no longer matches the stored checkpoints. mtlib therefore ships one copy
(``pydoc_topics.json.gz``, the dictionary of Python 3.11.7, PSF-licensed like all of Python's
documentation) and checks its SHA-256 when it loads it, so every machine trains and evaluates on
the same text.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import lru_cache
from pathlib import Path

# The shipped file, and the SHA-256 of its decompressed JSON (``sort_keys=True, indent=0``).
_TOPICS_FILE = Path(__file__).with_name("pydoc_topics.json.gz")
_TOPICS_SHA256 = "c0a5315f3867c0f7c5f1d5d3200a72f7963b4e0d5d3ccfd90adf22ce89d4fd8a"
_TOPICS_PYTHON = "3.11.7"


@lru_cache(maxsize=1)
def _topics_json() -> str:
    raw = gzip.decompress(_TOPICS_FILE.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != _TOPICS_SHA256:
        raise RuntimeError(
            f"{_TOPICS_FILE.name} is damaged or was replaced: its SHA-256 is {digest}, expected "
            f"{_TOPICS_SHA256} (Python {_TOPICS_PYTHON}'s pydoc_data.topics); reinstall mtlib"
        )
    return raw.decode("utf-8")


def pydoc_topics() -> dict[str, str]:
    """Python 3.11.7's ``pydoc_data.topics``: topic name -> text (79 topics, 465,000 characters).

    The same on every machine and Python version (a fresh dictionary on each call, so a caller
    may change it). Raises ``RuntimeError`` if the shipped file does not match its checksum.
    """
    topics = json.loads(_topics_json())
    assert isinstance(topics, dict)
    return topics
