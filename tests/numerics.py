"""The CPU numerics under which the chapters' committed outputs are produced and checked.

PyTorch, MKL, oneDNN, OpenBLAS and NumPy each pick their CPU kernels at run time from the
processor's instruction set (AVX-512 where it exists, AVX2 otherwise), and different kernels
round differently. A few hundred optimiser steps amplify a last-bit difference into the second
decimal of a printed loss. So the two commands that execute notebooks against their committed
outputs, ``python -m tests.execute_notebooks`` (writes them) and the nbval stage of
``tests/run_all.sh`` (checks them), run every kernel process with the environment below:

* :data:`PINNED`, the pin: kernels every x86-64 processor of the last decade runs identically
  (AVX2 with FMA: Intel since 2013, AMD since 2015). What each knob changed when it was measured
  is in its comment; ``--perturb`` (``python -m tests.execute_notebooks --perturb``) re-measures it.
* :data:`PERTURBED`, a different kernel choice that any one machine can run, for the sensitivity
  check: the cells whose output it changes depend on the pin (see ``tests/pinned_outputs.yml``).

The variables must be in the environment *before* the kernel process starts (the libraries
read them once, when they load); setting them inside a notebook after ``import torch`` does
nothing. As a pytest plugin (``-p tests.numerics``), this module puts the pin into
``os.environ`` when pytest starts, so the kernels nbval starts inherit it.
``MTLIB_NUMERICS=native`` turns the pin off (to see what a reader's machine prints).

Command line::

    python -m tests.numerics            # what this process's libraries report under the pin
    python -m tests.numerics --export   # the pin as shell `export` lines
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

#: Name of the variable that chooses the numerics: ``pinned`` (default), ``perturbed``, ``native``.
MODE_ENV = "MTLIB_NUMERICS"

#: The pin. Measured on an AMD EPYC (Zen 3, AVX2, no AVX-512) with torch 2.13.0+cpu (MKL
#: 2024.2, oneDNN 3.12), numpy 2.4 (OpenBLAS 0.3.31), by hashing the results of each library's
#: kernels with and without the knob (CONTRIBUTING.md, "Outputs that survive CI").
PINNED: dict[str, str] = {
    # PyTorch's own vectorised kernels (randn, softmax, exp, sums, layer norm, the CPU flash
    # attention): AVX2 also where AVX-512 exists. `default` instead changed every one of them.
    "ATEN_CPU_CAPABILITY": "avx2",
    # MKL's conditional numerical reproducibility (sgemm: every Linear and matmul). Only
    # COMPATIBLE is reproducible on Intel *and* AMD: MKL honours AVX2, SSE4_2, ... on Intel
    # processors only and silently uses AUTO elsewhere (on the AMD machine AVX2 == AUTO, and
    # AUTO changed bmm against no CNR at all). COMPATIBLE changed mm, bmm and SDPA's matmuls.
    "MKL_CBWR": "COMPATIBLE",
    # oneDNN (GELU, convolutions): at most AVX2. SSE41 instead changed GELU and conv2d.
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    # NumPy's and SciPy's OpenBLAS (numpy matmul): the Haswell (AVX2) kernels, which this AMD
    # machine picks by itself; an AVX-512 machine would pick SkylakeX. Prescott changed matmul.
    "OPENBLAS_CORETYPE": "Haswell",
    # NumPy's own SIMD loops (exp, log, sums, sorting): AVX2 (X86_V3) at most.
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}

#: Another kernel choice for the sensitivity check: the same knobs, each moved somewhere else
#: that every x86-64 machine can run.
PERTURBED: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "AUTO",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OPENBLAS_CORETYPE": "Prescott",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
}

MODES = ("pinned", "perturbed", "native")


def environment(mode: str = "pinned", only: str | None = None) -> dict[str, str]:
    """The variables to set for ``mode``; with ``only``, perturb just that knob (others pinned)."""
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV} must be one of {MODES}, got {mode!r}")
    if only is not None:
        if only not in PINNED:
            raise ValueError(f"only must be one of {sorted(PINNED)}, got {only!r}")
        return {**PINNED, only: PERTURBED[only]}
    return {"pinned": PINNED, "perturbed": PERTURBED, "native": {}}[mode]


def apply(env: MutableMapping[str, str] | None = None, mode: str | None = None,
          only: str | None = None) -> dict[str, str]:
    """Put ``mode``'s variables (default: ``$MTLIB_NUMERICS`` or pinned) into ``env``; return them.

    In ``native`` mode the knobs are removed, so a kernel sees what a reader's machine chooses.
    """
    env = os.environ if env is None else env
    mode = mode or env.get(MODE_ENV) or "pinned"
    chosen = environment(mode, only)
    for key in PINNED:
        env.pop(key, None)
    env.update(chosen)
    env[MODE_ENV] = mode if only is None else f"pinned, {only} perturbed"
    return chosen


def describe(env: Mapping[str, str] | None = None) -> str:
    """One line: the mode and each knob's value, for logs and report headers."""
    env = os.environ if env is None else env
    knobs = ", ".join(f"{k}={env.get(k, '(unset)')}" for k in PINNED)
    return f"numerics {env.get(MODE_ENV, 'native')}: {knobs}"


def report() -> str:
    """What the libraries of *this* process say they use (run it under the pin to check it)."""
    import numpy as np
    import torch

    lines = [describe(), f"torch {torch.__version__}: CPU capability "
             f"{torch.backends.cpu.get_cpu_capability()}", f"numpy {np.__version__}"]
    return "\n".join(lines)


def pytest_configure(config: object) -> None:  # noqa: ARG001
    """Loaded with ``-p tests.numerics``: pin the numerics before nbval starts any kernel."""
    apply()


def pytest_report_header(config: object) -> str:  # noqa: ARG001
    return describe()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--export"]:
        for key, value in {**PINNED, MODE_ENV: "pinned"}.items():
            print(f"export {key}='{value}'")
        return 0
    if argv:
        print(__doc__)
        return 2
    if os.environ.get(MODE_ENV) is None:  # re-run this module under the pin
        import subprocess

        env = dict(os.environ)
        apply(env)
        return subprocess.call([sys.executable, "-m", "tests.numerics"], env=env)
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
