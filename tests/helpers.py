"""Helpers shared by the tests: parity tolerances, the table of contents."""

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

# The parity tolerances every comparison with PyTorch uses: float32 1e-5, float64 1e-10.
TOL = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-10, "rtol": 1e-10}}


def close(actual: Tensor, expected: Tensor) -> None:
    """assert_close at the parity tolerance of ``expected``'s dtype."""
    torch.testing.assert_close(actual, expected, **TOL[expected.dtype])


def toc_files(node: Any) -> Iterator[str]:
    """Every ``file:`` entry of a parsed ``_toc.yml``, in order."""
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from toc_files(item)
