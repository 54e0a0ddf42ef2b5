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

* The pin does not make every kernel vendor-independent. Measured: on an Intel Xeon with
  AVX-512 the pinned kernels reproduced the AMD machine's committed outputs in chapters 2, 5 and
  7-15 but not the training outputs of chapters 1, 3, 4 and 6: the four that train with
  ``torch.optim.Adam``, whose per-tensor update takes its ``sqrt`` in MKL's vector-math library
  (which, like the GRU's ``tanh``, follows ``MKL_CBWR``); the chapters that matched train with the
  fused AdamW of ``mtlib.train``. The likely cause, not isolated on an AMD machine.
  So each chapter records the **fingerprint** of the machine that executed it
  (:func:`fingerprint`: hashes of a fixed set of kernel results under the pin, one per kernel
  family) in ``tests/numerics_fingerprints.json``. Where the checking machine's fingerprint is
  the recorded one, every cell is compared. Where it differs, the cells listed in
  ``tests/pinned_outputs.yml`` still run, with every assert (each claim holds with a margin
  below the worst of its seeds), but their printed digits are not compared; every other cell
  is. The pytest header and the run's last lines say which chapters and kernel families differ.

Command line::

    python -m tests.numerics                 # what this process's libraries report under the pin
    python -m tests.numerics --export        # the pin as shell `export` lines
    python -m tests.numerics --fingerprint   # this machine's fingerprint under the pin (JSON)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: ``{notebook stem: fingerprint}`` of the machine that last executed each chapter.
FINGERPRINTS = ROOT / "tests" / "numerics_fingerprints.json"
PINNED_OUTPUTS = ROOT / "tests" / "pinned_outputs.yml"

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


def _probe() -> dict[str, str]:
    """Hash the results of each kernel family the chapters' training runs use (in this process).

    Every input is drawn from a seeded generator and every shape is odd, so that a kernel that
    sums in another order, or a function approximated another way, changes its family's hash.
    """
    import hashlib

    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)  # as utils.setup() runs every chapter
    g = torch.Generator().manual_seed(0)

    def digest(*tensors: Any) -> str:
        sha = hashlib.sha1()
        for t in tensors:
            array = t.detach().contiguous().numpy() if isinstance(t, torch.Tensor) else t
            sha.update(np.ascontiguousarray(array).tobytes())
        return sha.hexdigest()[:12]

    x = torch.randn(301, 67, generator=g)
    pos = x.abs() + 0.1
    out = {
        # MKL's vector math (torch.sqrt, tanh, exp, log, erf, sin on float tensors)
        "mkl_vml": digest(pos.sqrt(), x.tanh(), x.exp(), pos.log(), torch.erf(x), x.sin()),
        # MKL's BLAS (every Linear and matmul)
        "mkl_blas": digest(x @ torch.randn(67, 45, generator=g),
                           torch.randn(5, 19, 33, generator=g) @ torch.randn(5, 33, 23, generator=g)),
        # PyTorch's own vectorised kernels
        "aten": digest(x.softmax(-1), F.log_softmax(x, 0), F.layer_norm(x, (67,)), F.gelu(x),
                       x.sigmoid(), x.sum(0), torch.randn(97, generator=g)),
        "sdpa": digest(F.scaled_dot_product_attention(
            *(torch.randn(2, 3, 11, 16, generator=g) for _ in range(3)), is_causal=True)),
        "onednn": digest(F.conv1d(x[None], torch.randn(7, 301, 5, generator=g)),
                         F.avg_pool1d(x[None], 3)),
        "numpy": digest(np.exp(x.numpy()) @ x.numpy().T),
    }
    # A few training steps: GRU, embedding, linear, cross-entropy, clipping, and each optimizer
    torch.manual_seed(0)
    embed, gru = torch.nn.Embedding(13, 10), torch.nn.GRU(10, 14, batch_first=True)
    head = torch.nn.Linear(14, 13)
    params = [*embed.parameters(), *gru.parameters(), *head.parameters()]
    tokens = torch.randint(0, 13, (6, 9), generator=g)
    for name, optimizer in [("adam", torch.optim.Adam(params, lr=1e-2)),
                            ("sgd", torch.optim.SGD(params, lr=0.1)),
                            ("fused_adamw", torch.optim.AdamW(params, lr=1e-2, fused=True))]:
        for _ in range(3):
            states, _ = gru(embed(tokens))
            loss = F.cross_entropy(head(states).reshape(-1, 13), tokens.roll(1, 1).reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
        out[f"train_{name}"] = digest(*params)
    return out


def fingerprint(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This machine's fingerprint under the pin: ``{kernel family: hash}`` (a fresh process)."""
    full = dict(os.environ if env is None else env)
    apply(full, "pinned")
    result = subprocess.run([sys.executable, "-m", "tests.numerics", "--probe"], env=full,
                            cwd=ROOT, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(result.stdout)


def recorded(path: Path | None = None) -> dict[str, dict[str, str]]:
    """``{notebook stem: fingerprint}`` of the machines that executed the chapters."""
    path = path or FINGERPRINTS
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def record(stems: Iterable[str], machine: Mapping[str, str], path: Path | None = None) -> None:
    """Record ``machine`` as the fingerprint the notebooks ``stems`` were executed under."""
    path = path or FINGERPRINTS
    table = recorded(path)
    table.update({stem: dict(machine) for stem in stems})
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    path.write_text(text, encoding="utf-8")


def differing(machine: Mapping[str, str], table: Mapping[str, Mapping[str, str]]
              ) -> dict[str, list[str]]:
    """``{stem: [kernel families whose hash differs]}`` for the chapters executed elsewhere."""
    out = {}
    for stem, theirs in table.items():
        families = sorted(k for k in set(theirs) | set(machine) if theirs.get(k) != machine.get(k))
        if families:
            out[stem] = families
    return out


def pinned_cells(path: Path | None = None) -> dict[tuple[str, str], str]:
    """``{(notebook stem, cell id): why}`` from ``tests/pinned_outputs.yml``."""
    import yaml

    path = path or PINNED_OUTPUTS
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    return {(e["notebook"], e["id"]): e["why"] for e in (data or [])}


_ELSEWHERE: dict[str, list[str]] | None = None


def _executed_elsewhere() -> dict[str, list[str]]:
    """The chapters whose recorded fingerprint is not this machine's (computed once)."""
    global _ELSEWHERE
    if _ELSEWHERE is None:
        _ELSEWHERE = differing(fingerprint(), recorded())
    return _ELSEWHERE


def pytest_configure(config: object) -> None:  # noqa: ARG001
    """Loaded with ``-p tests.numerics``: pin the numerics before nbval starts any kernel."""
    apply()


def pytest_report_header(config: object) -> list[str]:  # noqa: ARG001
    return [describe(), *_fingerprint_lines()]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The same lines after the run, where ``-q`` (the nbval stage) hides the header."""
    for line in _fingerprint_lines():
        terminalreporter.write_line(line)


def _fingerprint_lines() -> list[str]:
    lines = []
    elsewhere = _executed_elsewhere()
    if not elsewhere:
        lines.append("numerics fingerprint: no chapter's recorded fingerprint differs from this machine's; "
                     "every cell's output is compared")
    for stem, families in elsewhere.items():
        lines.append(f"numerics fingerprint: {stem} was executed where {', '.join(families)} "
                     "differ; its cells in tests/pinned_outputs.yml run their asserts, "
                     "outputs not compared")
    return lines


def pytest_collection_modifyitems(config: object, items: list[Any]) -> None:  # noqa: ARG001
    """Cells listed in tests/pinned_outputs.yml of a chapter executed under another fingerprint:
    run (every assert), but do not compare their printed digits. Every other cell is compared."""
    cells = [item for item in items if hasattr(item, "cell") and hasattr(item, "options")]
    if not cells:
        return
    elsewhere, listed = _executed_elsewhere(), pinned_cells()
    for item in cells:
        stem = Path(str(getattr(item, "path", None) or item.fspath)).stem
        if stem in elsewhere and (stem, item.cell.get("id")) in listed:
            item.options["check"] = False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--probe"]:  # the fingerprint's measurement (run under the pin by fingerprint())
        print(json.dumps(_probe()))
        return 0
    if argv == ["--fingerprint"]:
        print(json.dumps(fingerprint(), indent=1))
        return 0
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
