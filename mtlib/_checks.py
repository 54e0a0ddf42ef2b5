"""Input checks shared by every mtlib module.

They only raise errors: a mistake gets a message that names the argument and the expected shape,
instead of a stack trace from inside a matmul. The teaching code calls them on its first line and
can be read without them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def shape_of(x: object) -> str:
    """``(2, 3)`` for a tensor, the type name for anything else (for error messages)."""
    return str(tuple(x.shape)) if isinstance(x, Tensor) else type(x).__name__


def positive_int(value: object, name: str) -> int:
    """Check that ``value`` is an int >= 1 (bools are refused) and return it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def probability(p: object, name: str) -> float:
    """Check that ``p`` is a float in [0, 1) (a dropout probability) and return it."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {p!r}")
    return float(p)


def float_tensor(x: object, name: str, expected: str, dims: Sequence[int | None] = ()) -> Tensor:
    """Check that ``x`` is a floating-point tensor and, if ``dims`` is given, of that shape.

    Args:
        x: The argument to check.
        name: Its name, for the message.
        expected: The expected shape in words, e.g. ``"(batch, seq_len, d_model=64)"``.
        dims: Expected sizes, one per dimension (None = any size); empty = any rank.

    Returns:
        ``x``, typed as a Tensor.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor of shape {expected}, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a floating-point Tensor of shape {expected}, got dtype {x.dtype}"
        )
    if dims and (
        x.dim() != len(dims)
        or any(d is not None and s != d for s, d in zip(x.shape, dims, strict=True))
    ):
        raise ValueError(f"{name} must have shape {expected}, got {tuple(x.shape)}")
    return x


def token_ids(x: object, name: str, vocab: int | None = None) -> Tensor:
    """Check that ``x`` is an integer tensor of shape (batch, seq_len >= 1) with ids < ``vocab``."""
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{name} must be a Tensor of token ids, shape (batch, seq_len), got {type(x).__name__}"
        )
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {x.dtype}")
    if x.dim() != 2 or x.shape[1] == 0:
        raise ValueError(f"{name} must have shape (batch, seq_len >= 1), got {tuple(x.shape)}")
    if vocab is not None and (x.min() < 0 or x.max() >= vocab):
        raise ValueError(
            f"{name} ids must lie in [0, {vocab}), got range [{int(x.min())}, {int(x.max())}]"
        )
    return x


def _autocast_enabled(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 has no device_type argument
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()
    except RuntimeError:  # a device autocast does not know, e.g. "meta"
        return False


def same(tensors: dict[str, Tensor], attr: str) -> None:
    """All tensors share the same ``attr`` ("dtype" or "device").

    Dtypes are not compared under :func:`torch.autocast`, which casts them itself.
    """
    compatible(list(tensors.items()), dtype=attr == "dtype", device=attr == "device")


def compatible(
    tensors: Sequence[tuple[str, Tensor]], *, dtype: bool = True, device: bool = True
) -> None:
    """Check that named tensors share one dtype (unless under autocast) and one device.

    Args:
        tensors: ``(name, tensor)`` pairs; the first is the reference named in messages.
        dtype: Compare dtypes.
        device: Compare devices.
    """
    first, ref = tensors[0]
    dtype = dtype and not _autocast_enabled(ref.device.type)
    for name, x in tensors[1:]:
        for attr, wanted in (("dtype", dtype), ("device", device)):
            if wanted and getattr(x, attr) != getattr(ref, attr):
                raise ValueError(
                    f"{name} and {first} must have the same {attr}, got {getattr(x, attr)} and {getattr(ref, attr)}"
                )
