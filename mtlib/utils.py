"""Seeding, device choice and rounding helpers.

Every chapter starts with one call::

    from mtlib import utils
    device = utils.setup(seed=0)

which seeds Python, NumPy and PyTorch, picks the device (cuda > mps > cpu, unless the
environment variable ``MTLIB_DEVICE`` says otherwise) and sets the book's plotting style.

**Other seeds.** With the environment variable ``MTLIB_SEED_SHIFT=k`` set (an integer), ``setup``
shifts *every* seed the chapter sets from then on by ``k``: its own, and each later
``torch.manual_seed(s)``, ``torch.Generator().manual_seed(s)``, ``np.random.seed(s)`` and
``random.seed(s)``, in the chapter and inside mtlib, become seed ``s + k``. So one variable re-runs
a whole chapter on other random draws without editing it; every assert must still hold. The seed
sweep (``python -m tests.seed_sweep``) uses it. A cell that re-runs one *stored* run of an
experiment script (to show that it reproduces, or to study that run's model) wraps it in
``with utils.unshifted():``: it keeps the script's seed, and the spread over seeds is the
script's table.

The rounding helpers exist because the book prints numbers that CI compares character by
character: a float printed with all its digits can differ in the last place between 1 and 16
threads. Print numbers rounded to what they are accurate to.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

__all__ = [
    "DEVICE_ENV",
    "SEED_SHIFT_ENV",
    "apply_seed_shift",
    "below",
    "fixed_generator",
    "fmt",
    "get_device",
    "in_colab",
    "rounded",
    "seed_everything",
    "seed_shift",
    "setup",
    "shapes",
    "unshifted",
]

#: Name of the environment variable that overrides the automatic device choice.
DEVICE_ENV = "MTLIB_DEVICE"

_KNOWN_DEVICES = ("cpu", "cuda", "mps")

#: Name of the environment variable that shifts every seed a chapter sets (see the module notes).
SEED_SHIFT_ENV = "MTLIB_SEED_SHIFT"


def seed_shift() -> int:
    """The shift ``MTLIB_SEED_SHIFT`` asks for (0 when unset).

    Raises:
        ValueError: if the variable is set but is not an integer >= 0.
    """
    text = os.environ.get(SEED_SHIFT_ENV, "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise ValueError(f"{SEED_SHIFT_ENV} must be an integer >= 0, got {text!r}")
    return int(text)


_installed_shift: int | None = None
_suspended = False  # True inside ``unshifted()``


def _install_seed_shift(shift: int) -> None:
    """Make every later seeding call add ``shift`` (once per process; the sweep's mechanism)."""
    global _installed_shift
    if _installed_shift is not None:
        if _installed_shift != shift:
            raise RuntimeError(f"the seed shift is already {_installed_shift}, cannot make it {shift}")
        return
    _installed_shift = shift
    torch_seed, np_seed, py_seed = torch.manual_seed, np.random.seed, random.seed

    def now() -> int:  # 0 inside ``unshifted()``
        return 0 if _suspended else shift

    def manual_seed(seed: int) -> torch.Generator:
        return torch_seed(int(seed) + now())

    class Generator(torch.Generator):  # what torch.Generator() makes from now on
        def manual_seed(self, seed: int) -> torch.Generator:
            return super().manual_seed(int(seed) + now())

    def numpy_seed(seed: Any = None) -> None:
        np_seed(None if seed is None else int(seed) + now())

    def python_seed(seed: Any = None, version: int = 2) -> None:
        py_seed(seed + now() if isinstance(seed, int) else seed, version)

    torch.manual_seed = manual_seed
    torch.random.manual_seed = manual_seed
    torch.Generator = Generator  # type: ignore[misc]
    np.random.seed = numpy_seed
    random.seed = python_seed  # type: ignore[assignment]


def apply_seed_shift() -> int:
    """Shift every later seed by ``MTLIB_SEED_SHIFT`` (a no-op when it is unset); return the shift.

    :func:`setup` calls it. A process that a chapter starts and that does not call ``setup``
    (the ``torchrun`` workers of chapter 13) calls it first, so that its seeds move with the
    chapter's under the seed sweep.
    """
    shift = seed_shift()
    if shift:
        _install_seed_shift(shift)
    return shift


@contextlib.contextmanager
def unshifted() -> Iterator[None]:
    """Seeds set inside this block are not shifted by ``MTLIB_SEED_SHIFT`` (a no-op without it).

    For a cell that re-runs one stored run of an experiment script, with that run's seed: to show
    that the run reproduces, or to study its model. Under the seed sweep such a cell would
    otherwise train a new draw and compare it with the stored one. The spread over seeds of a
    stored experiment is the script's own table, not the sweep's.
    """
    global _suspended
    before, _suspended = _suspended, True
    try:
        yield
    finally:
        _suspended = before


def fixed_generator(seed: int, device: str | torch.device | None = None) -> torch.Generator:
    """A ``torch.Generator`` seeded with ``seed`` as written, even under ``MTLIB_SEED_SHIFT``.

    For the fixed data split or evaluation set of a stored experiment (the digits' test images,
    a held-out sample): the seed sweep moves the runs, not the yardstick they are scored on, and
    a stored model scored on another split would be scored partly on its training data.
    """
    with unshifted():
        return torch.Generator(device=device).manual_seed(int(seed))


def seed_everything(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and PyTorch (all devices) with one number.

    Args:
        seed: a non-negative integer.

    Raises:
        TypeError: if ``seed`` is not an int.
        ValueError: if ``seed`` is negative.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def get_device(prefer: str | None = None) -> torch.device:
    """Pick the device to run on: ``cuda`` > ``mps`` > ``cpu``.

    The choice can be forced with the argument or, when the argument is None, with the
    environment variable ``MTLIB_DEVICE`` (for example ``MTLIB_DEVICE=cpu`` on a GPU machine,
    to reproduce the CPU numbers printed in the book).

    Args:
        prefer: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or None for automatic.

    Returns:
        The chosen ``torch.device``.

    Raises:
        ValueError: if the requested device is unknown or not available on this machine.
    """
    source = "prefer"
    if prefer is None:
        prefer = os.environ.get(DEVICE_ENV) or None
        source = DEVICE_ENV
    if prefer is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    kind = prefer.split(":")[0].strip().lower()
    if kind not in _KNOWN_DEVICES:
        raise ValueError(
            f"{source} must be one of {_KNOWN_DEVICES} (optionally 'cuda:N'), got {prefer!r}"
        )
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": _mps_available()}
    if not available[kind]:
        raise ValueError(
            f"{source}={prefer!r} was requested but {kind} is not available on this machine"
        )
    return torch.device(prefer.strip().lower())


def in_colab() -> bool:
    """True when running inside Google Colab."""
    return "google.colab" in sys.modules


def setup(
    seed: int = 0, device: str | None = None, style: bool = True, threads: int | None = 1
) -> torch.device:
    """One call at the top of every chapter: seeds, CPU threads, device and plotting style.

    Args:
        seed: seed for ``random``, NumPy and PyTorch.
        device: force a device (see :func:`get_device`); None chooses automatically.
        style: apply the book's matplotlib style (:func:`mtlib.viz.set_style`).
        threads: CPU threads PyTorch may use. The book's default, 1, is the fastest for its
            small tensors (more threads spin-wait, badly on a busy machine) and makes sums come
            out the same on every machine, whatever its core count. None keeps PyTorch's choice
            (better for large matrices).

    Returns:
        The device the chapter should use.

    With ``MTLIB_SEED_SHIFT=k`` in the environment, this and every later seed is shifted by ``k``
    (see the module notes).
    """
    apply_seed_shift()
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
        torch.set_num_threads(threads)
    seed_everything(seed)
    if style:
        from mtlib import viz  # imported here so that mtlib.utils does not need matplotlib

        viz.set_style()
    return get_device(device)


def rounded(value: Any, decimals: int = 3) -> Any:
    """Round a number, tensor, array or (nested) list/tuple/dict of them for printing.

    Tensors and arrays become (nested) Python lists of floats, so that what is printed does
    not depend on PyTorch's print options. ``-0.0`` is printed as ``0.0``.

    Args:
        value: what to round.
        decimals: number of decimals to keep.

    Returns:
        The same structure with every float rounded.

    Example:
        >>> rounded(torch.tensor([0.12345, 2.0]), 2)
        [0.12, 2.0]
    """
    if isinstance(value, torch.Tensor):
        return rounded(value.detach().cpu().double().tolist(), decimals)
    if isinstance(value, np.ndarray):
        return rounded(value.astype(float).tolist(), decimals)
    if isinstance(value, Mapping):
        return {k: rounded(v, decimals) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(rounded(v, decimals) for v in value)
    if isinstance(value, (bool, int, np.integer)):
        return value
    if isinstance(value, (float, np.floating)):
        r = round(float(value), decimals)
        return 0.0 if r == 0 else r
    raise TypeError(
        f"value must be a number, tensor, array, list, tuple or dict, got {type(value).__name__}"
    )


def below(value: float | torch.Tensor, bound: float) -> str:
    """Print a rounding error or a tolerance as the bound it stays under, e.g. ``"< 1e-6"``.

    Errors at the level of float rounding (1e-7 in float32) change with the kernel that computed
    them, so the book prints the bound, and asserts it separately
    (``assert err < 1e-6``). A value that is not below the bound is printed as itself, so the
    page never shows a false bound.

    Args:
        value: a Python/NumPy number or a one-element tensor (for example a largest error).
        bound: a positive number, shown in short scientific notation.

    Example:
        >>> below(1.1e-07, 1e-6)
        '< 1e-6'
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"value must be a single number, got a tensor of shape {tuple(value.shape)}"
            )
        value = value.item()
    if not bound > 0:
        raise ValueError(f"bound must be a positive number, got {bound!r}")
    mantissa, exponent = f"{float(bound):.0e}".split("e")
    short = f"{mantissa}e{int(exponent)}" if not 0.001 <= bound < 1000 else f"{bound:g}"
    if float(value) < bound:
        return f"< {short}"
    return f"{float(value):.2g} (not below {short})"


def fmt(value: float | torch.Tensor, sig: int = 3) -> str:
    """Format one number with ``sig`` significant digits, e.g. ``fmt(0.012345) == '0.0123'``.

    Args:
        value: a Python/NumPy number or a one-element tensor.
        sig: significant digits (>= 1).
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"value must be a single number, got a tensor of shape {tuple(value.shape)}"
            )
        value = value.item()
    if sig < 1:
        raise ValueError(f"sig must be >= 1, got {sig}")
    text = f"{float(value):.{sig}g}"
    return "0" if text in ("-0", "0") else text


def shapes(**named: torch.Tensor | Iterable[int]) -> str:
    """A one-line-per-tensor table of shapes, for the "print the shapes" moments.

    Example:
        >>> print(shapes(q=torch.zeros(2, 5, 8), k=torch.zeros(2, 7, 8)))
        q  (2, 5, 8)
        k  (2, 7, 8)
    """
    width = max((len(name) for name in named), default=0)
    lines = []
    for name, t in named.items():
        shape = tuple(t.shape) if isinstance(t, torch.Tensor) else tuple(t)
        lines.append(f"{name:<{width}}  {shape}")
    return "\n".join(lines)
