"""Helpers shared by the parity tests."""

import torch
from torch import Tensor

# The parity tolerances every comparison with PyTorch uses: float32 1e-5, float64 1e-10.
TOL = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-10, "rtol": 1e-10}}


def close(actual: Tensor, expected: Tensor) -> None:
    """assert_close at the parity tolerance of ``expected``'s dtype."""
    torch.testing.assert_close(actual, expected, **TOL[expected.dtype])
