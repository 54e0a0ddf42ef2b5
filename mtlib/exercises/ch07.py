"""Chapter 7, the Transformer block: self-checks for the SwiGLU feed-forward network, RMSNorm
and the parallel block.

- :func:`check_swiglu_width` and :func:`check_swiglu_ffn`: a SwiGLU FFN with exactly the weights
  of a given ReLU FFN (no biases), and its forward pass;
- :func:`check_rms_norm_by_hand`: RMSNorm in float32, with a padding row of zeros and an outlier
  row next to ordinary ones;
- :func:`check_parallel_block`: the parallel block of GPT-J and PaLM,
  ``x + attn(norm(x)) + ff(norm(x))``.

Every tensor case uses distinct sizes (batch != seq_len != d_model, and the hidden width
differs from d_model), so a missing transpose raises or fails. Besides comparing with a float64
reference, each checker recognises the classic wrong answers (the SiLU on the wrong projection,
LayerNorm's mean subtraction, epsilon outside the square root, the sequential Pre-LN wiring for
the parallel one, a missing residual, the residual taken from the normalised input,
``attn(x)[0]``) and names them. The inputs are CPU tensors; a result computed on another device
is moved back before the comparison, a result on the ``meta`` device (no values) is reported in
words, and a device mismatch inside the learner's code gets its own hint.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from mtlib.exercises._core import _Case, _check, _describe, _fail, _learner_line

__all__ = [
    "check_parallel_block",
    "check_rms_norm_by_hand",
    "check_swiglu_ffn",
    "check_swiglu_width",
]

Fn = Callable[..., Any]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------------------------
# 1. SwiGLU with the weights of a given ReLU FFN
# --------------------------------------------------------------------------------------------


def check_swiglu_width(fn: Fn) -> None:
    """Check ``fn(d_model, d_ff)``: the hidden width of a SwiGLU FFN (no biases) with exactly
    the weights of a ReLU FFN of width ``d_ff`` (no biases), as an ``int``.

    A ReLU FFN has ``2 * d_model * d_ff`` weights, a SwiGLU FFN of width ``h`` has
    ``3 * d_model * h``. When no integer width gives exactly the same count, ``fn`` must raise
    ``ValueError``. Cases: the chapter's d_model 16, d_ff 96; d_ff = 4 * d_model; a d_ff that is
    not 4 * d_model; d_ff = 4 * d_model = 64, where the width would be 42.7. Recognised mistakes:
    a float, the ratio inverted (3/2), the ReLU width unchanged, Shazeer's 8/3 * d_model
    where d_ff is not 4 * d_model, a rounded width where none matches, a ``ValueError`` where
    a width exists.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_swiglu_width"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    sizes = [(16, 96), (12, 48), (6, 15), (16, 64)]
    for number, (d, d_ff) in enumerate(sizes, start=1):
        where = f"case {number} of {len(sizes)} (d_model {d}, d_ff {d_ff})"
        target = 2 * d * d_ff  # the ReLU FFN's weights
        exists = target % (3 * d) == 0
        try:
            got = fn(d, d_ff)
        except ValueError as error:
            if not exists:
                continue
            raise _fail(checker, where, f"your function raised ValueError: {error}",
                        f"a SwiGLU width with exactly the ReLU FFN's {target} weights exists here") from None  # fmt: skip
        except Exception as error:
            stub = isinstance(error, NotImplementedError)
            line = "" if stub else _learner_line(error)
            hint = "" if stub or exists else (
                f"no integer width exists here, and the contract is to raise ValueError "
                f"(not {type(error).__name__})")
            raise _fail(checker, where, f"your function raised {type(error).__name__}: {error}{line}", hint) from None
        if isinstance(got, bool) or isinstance(got, float):
            hint = ("a width counts hidden units: return an int (torch.randn(d, 64.0) and "
                    "nn.Linear(d, 64.0) refuse a float)")  # fmt: skip
            if not exists:
                hint = f"no integer width matches here: raise ValueError ({2 * d_ff}/3 = {2 * d_ff / 3:.4g})"
            raise _fail(checker, where, f"expected an int, got {_describe(got)}", hint)
        try:
            h = operator.index(got)
        except TypeError:
            raise _fail(checker, where, f"expected an int, got {_describe(got)}",
                        "a width counts hidden units: return an int") from None  # fmt: skip
        weights = 3 * d * h
        what = (f"your width {h} gives a SwiGLU FFN of 3 * {d} * {h} = {weights} weights; the ReLU "
                f"FFN has 2 * {d} * {d_ff} = {target}")  # fmt: skip
        if not exists:
            raise _fail(checker, where, what, f"no integer width matches {target} weights exactly "
                        f"here ({2 * d_ff}/3 = {2 * d_ff / 3:.4g} is not an integer): raise ValueError")  # fmt: skip
        if weights == target:
            continue
        if h == d_ff:
            hint = "at the ReLU FFN's own width SwiGLU has 1.5 times its weights: it has three matrices, not two"
        elif h == 3 * d_ff // 2:
            hint = "you inverted the ratio: SwiGLU has MORE matrices (three), so at equal weights its width is smaller"
        elif h in (8 * d // 3, round(8 * d / 3)) and d_ff != 4 * d:
            hint = (f"8/3 * d_model is the matched width only when d_ff = 4 * d_model; here d_ff = {d_ff}, "
                    f"not {4 * d}: start from d_ff")  # fmt: skip
        else:
            hint = "count the weights of both networks and set the counts equal"
        raise _fail(checker, where, what, hint)
    print(f"{checker}: all {len(sizes)} cases passed.")


def _swiglu(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor, *, mistake: str = "") -> Tensor:
    x, w_gate, w_up, w_down = (t.double() for t in (x, w_gate, w_up, w_down))
    gate, up = x @ w_gate, x @ w_up  # (..., h), (..., h)
    if mistake == "swapped":
        gate, up = up, gate
    act = {"sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu}.get(mistake, F.silu)
    if mistake == "after":
        return F.silu(gate * up) @ w_down
    if mistake == "no up":
        return F.silu(gate) @ w_down
    if mistake == "both":
        return (F.silu(gate) * F.silu(up)) @ w_down
    return (act(gate) * up) @ w_down  # (..., d_model)


def check_swiglu_ffn(fn: Fn) -> None:
    """Check ``fn(x, w_gate, w_up, w_down)``: the SwiGLU FFN without biases,
    ``(SiLU(x W_gate) * x W_up) W_down``.

    Row-vector convention: ``x`` is ``(..., d_model)``, ``w_gate`` and ``w_up`` are
    ``(d_model, h)``, ``w_down`` is ``(h, d_model)``, with ``h`` the width of
    :func:`check_swiglu_width` (2/3 of a ReLU FFN's d_ff). Cases: a batch of sequences, a single
    vector, and a float64 batch whose gate pre-activations reach 810 (beyond 709, where
    ``exp(z) / (1 + exp(z))`` is inf / inf even in float64). Recognised mistakes: the SiLU on the
    up projection, SiLU on both, SiLU after the product, no up projection, a sigmoid (GLU), ReLU
    (ReGLU) or GELU (GEGLU) gate.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """

    def case(seed: int, shape: tuple[int, ...], d: int, h: int, gate_scale: float = 1.0,
             dtype: torch.dtype = torch.float32) -> tuple[Tensor, ...]:  # fmt: skip
        g = _gen(seed)
        x = torch.randn(*shape, d, generator=g, dtype=dtype)
        return (
            x,
            torch.randn(d, h, generator=g, dtype=dtype) * gate_scale / d**0.5,
            torch.randn(d, h, generator=g, dtype=dtype) / d**0.5,
            torch.randn(h, d, generator=g, dtype=dtype) / h**0.5,
        )

    hint = ("the weights are already in row-vector form, w_gate and w_up (d_model, h) and w_down "
            "(h, d_model): x @ w_gate needs no .T, unlike nn.Linear's .weight. Then compare with "
            "SwiGLU's formula in section 7.2: which projection goes through the SiLU, and where "
            "does the element-wise product come in?")  # fmt: skip
    cases = [
        _Case("batch 2, seq_len 3, d_model 6, width 10 (a ReLU FFN's d_ff 15)",
              case(0, (2, 3), 6, 10), hint=hint),
        _Case("one vector, d_model 5, width 8 (d_ff 12)", case(1, (), 5, 8), hint=hint),
        _Case("float64 batch 3, seq_len 2, d_model 4, width 14, gate pre-activations from about -930 to 810",
              case(2, (3, 2), 4, 14, gate_scale=500.0, dtype=torch.float64),
              hint="the gate's pre-activations reach 810 here, and exp(z) overflows beyond 709 even "
                   "in float64: a SiLU written with exp(z) / (1 + exp(z)) gives inf / inf = NaN "
                   "(section 7.2's my_silu does not); and keep the input's float64"),
    ]  # fmt: skip

    def mistake(name: str) -> Fn:
        return lambda *a: _swiglu(*a, mistake=name)

    mistakes = [
        ("the SiLU goes on the gate projection (x @ w_gate); you applied it to the up projection", mistake("swapped")),
        ("only the gate goes through the SiLU; the up projection stays linear", mistake("both")),
        ("the SiLU acts on the gate alone, before the element-wise product, not on the product", mistake("after")),
        ("your output ignores w_up: without the up projection this is a plain SiLU FFN, not a gated one", mistake("no up")),
        ("this gate is a sigmoid (Dauphin's GLU); SwiGLU's gate is SiLU(z) = z * sigmoid(z)", mistake("sigmoid")),
        ("this gate is a ReLU (ReGLU, exercise 5's variant); SwiGLU's gate is the SiLU", mistake("relu")),
        ("this gate is a GELU (GEGLU); SwiGLU's gate is the SiLU", mistake("gelu")),
    ]  # fmt: skip
    _check("check_swiglu_ffn", fn, cases, _swiglu, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 2. RMSNorm
# --------------------------------------------------------------------------------------------


def _rms_norm(x: Tensor, weight: Tensor, eps: float, *, mistake: str = "") -> Tensor:
    x, weight = x.double(), weight.double()
    if mistake == "no weight":
        weight = torch.ones_like(weight)
    if mistake in ("centred", "var", "var0"):  # LayerNorm's statistics
        centred = x - x.mean(-1, keepdim=True)
        var = {"centred": centred.pow(2).mean(-1, keepdim=True), "var": x.var(-1, keepdim=True),
               "var0": x.var(-1, keepdim=True, correction=0)}[mistake]  # fmt: skip
        return (centred if mistake == "centred" else x) / (var + eps).sqrt() * weight
    if mistake == "std":
        return x / (x.std(-1, keepdim=True) + eps) * weight
    dims: dict[str, int | tuple[int, ...]] = {"global": tuple(range(x.dim())), "dim 0": 0}
    mean_square = x.pow(2).mean(dims.get(mistake, -1), keepdim=True)
    if mistake == "eps outside":
        return x / (mean_square.sqrt() + eps) * weight
    if mistake == "no eps":
        return x / mean_square.sqrt() * weight
    if mistake == "l2":
        return x / (x.pow(2).sum(-1, keepdim=True) + eps).sqrt() * weight
    if mistake == "eps in sum":
        return x / ((x.pow(2).sum(-1, keepdim=True) + eps) / x.shape[-1]).sqrt() * weight
    return x / (mean_square + eps).sqrt() * weight


def check_rms_norm_by_hand(fn: Fn) -> None:
    """Check ``fn(x, weight, eps)``: RMSNorm over the last dimension,
    ``x / sqrt(mean(x**2) + eps) * weight`` (the result's dtype is not checked).

    ``x`` is ``(..., d)`` float32 and ``weight`` the gain ``(d,)``; no centring and no bias.
    The reference is computed in float64. Cases: a ``(2, 3, 5)`` batch with mean 1.5 (so a
    subtracted mean shows), a nearly-zero input where ``eps = 0.1`` matters, and a batch of
    tokens with a padding row of zeros and an outlier row of size 1e4 next to rows of size 1.
    Recognised mistakes: LayerNorm's mean subtraction, ``x.var`` (either correction), ``x.std``, ``eps`` outside the root, no
    ``eps``, the L2 norm (a sum), ``eps`` added to the sum, no gain, one mean square over the
    whole tensor or over the batch dimension.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = _gen(7)
    tokens = torch.randn(5, 6, generator=g)
    tokens[1] = 0.0  # a padding token's embedding (padding_idx: the zero vector, section 7.4)
    tokens[3] = 1e4 * (1 + torch.rand(6, generator=g)) * torch.sign(torch.randn(6, generator=g))
    cases = [
        _Case("x (2, 3, 5) float32 with mean 1.5, a learned weight, eps 1e-6",
              (torch.randn(2, 3, 5, generator=g) + 1.5, 1 + 0.5 * torch.randn(5, generator=g), 1e-6),
              hint="over which dimension is the mean square taken, and how does the weight enter?"),
        _Case("nearly-zero x (3, 7) float32 with std 0.01, eps 0.1",
              (0.01 * torch.randn(3, 7, generator=g), 1 + 0.5 * torch.randn(7, generator=g), 0.1),
              hint="eps matters here: where is it in your formula, and what is it added to?"),
        _Case("x (5, 6) float32: row 1 all zeros (padding), row 3 of size 1e4, eps 1e-5",
              (tokens, 1 + 0.5 * torch.randn(6, generator=g), 1e-5),
              hint="row 1 is all zeros (a padding token) and row 3 is 10^4 times the others: each "
                   "row must be normalised on its own, and the zero row must stay finite"),
    ]  # fmt: skip

    def mistake(name: str) -> Fn:
        return lambda *a: _rms_norm(*a, mistake=name)

    mistakes = [
        ("you subtracted the mean: that is LayerNorm. RMSNorm only rescales (no centring)", mistake("centred")),
        ("x.var subtracts the mean (and divides by d - 1): RMSNorm needs the mean square of x itself", mistake("var")),
        ("x.var subtracts the mean (also with correction=0): RMSNorm needs the mean square of x itself", mistake("var0")),
        ("x.std subtracts the mean: RMSNorm needs the root of the mean square of x itself", mistake("std")),
        ("eps goes inside the square root, added to the mean square", mistake("eps outside")),
        ("you left out eps: it keeps the denominator away from 0", mistake("no eps")),
        ("you divided by the L2 norm (the root of a sum): RMS is the root of the MEAN square", mistake("l2")),
        ("eps is added to the MEAN square; added to the sum, it is divided by d", mistake("eps in sum")),
        ("what happened to the gain `weight`?", mistake("no weight")),
        ("you took one mean square over the whole tensor: RMSNorm normalises each vector (token) on "
         "its own, over its last dimension", mistake("global")),
        ("you took the mean square over the batch (dim 0), as BatchNorm would; RMSNorm normalises "
         "each vector over its own features", mistake("dim 0")),
    ]  # fmt: skip
    _check("check_rms_norm_by_hand", fn, cases, _rms_norm, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 3. The parallel block (GPT-J, PaLM)
# --------------------------------------------------------------------------------------------


def _block_case(seed: int, batch: int, seq_len: int, d: int) -> tuple[Any, ...]:
    """x and four sublayer functions: attention mixes positions (seq_len != d), ff does not."""
    g = _gen(seed)
    x = torch.randn(batch, seq_len, d, generator=g, dtype=torch.float64)
    w_attn = torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5
    w_ff = torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5
    gains = [1 + 0.3 * torch.randn(d, generator=g, dtype=torch.float64) for _ in range(2)]
    shifts = [0.2 * torch.randn(d, generator=g, dtype=torch.float64) for _ in range(2)]
    causal = torch.ones(seq_len, seq_len, dtype=torch.float64).tril()
    causal = causal / causal.sum(-1, keepdim=True)  # (T, T): average over positions <= t

    def attn(h: Tensor) -> Tensor:  # mixes positions: a causal average, then a linear map
        return (causal @ h) @ w_attn

    def ff(h: Tensor) -> Tensor:  # position-wise
        return torch.tanh(h @ w_ff)

    def norm(i: int) -> Callable[[Tensor], Tensor]:
        def apply(h: Tensor) -> Tensor:
            return F.layer_norm(h, (d,), gains[i], shifts[i])

        return apply

    return x, attn, ff, norm(0), norm(1)


_TUPLE_HINT = ("attn here is a plain function that returns the (B, T, d) tensor itself, so "
               "attn(...)[0] is the first sequence of the batch, broadcast over the others. "
               "(block.self_attn in section 7.5 returns a pair, (output, weights): that is "
               "why the chapter's my_block indexes it)")  # fmt: skip
_NORMED_RESIDUAL_HINT = ("your residual adds the normalised input: the stream that runs past "
                         "each sublayer is the raw x, and only the sublayer's input is "
                         "normalised (see Pre-LN in section 7.1)")  # fmt: skip


def _parallel(x: Tensor, attn: Fn, ff: Fn, norm: Fn, *, mistake: str = "") -> Tensor:
    h = norm(x)
    if mistake == "sequential":  # Pre-LN: the FFN reads the stream after attention
        x = x + attn(h)
        return x + ff(norm(x))
    if mistake == "normed residual":
        return h + attn(h) + ff(h)
    if mistake == "tuple":
        return x + attn(h)[0] + ff(h)
    if mistake == "ff raw":
        return x + attn(h) + ff(x)
    if mistake == "attn raw":
        return x + attn(x) + ff(h)
    if mistake == "no residual":
        return attn(h) + ff(h)
    if mistake == "two residuals":
        return (x + attn(h)) + (x + ff(h))
    if mistake == "post":
        return norm(x + attn(x) + ff(x))
    if mistake == "ff only":
        return x + ff(h)
    if mistake == "attn only":
        return x + attn(h)
    return x + attn(h) + ff(h)


def check_parallel_block(fn: Fn) -> None:
    """Check ``fn(x, attn, ff, norm)``: the parallel block of GPT-J and PaLM,
    ``x + attn(norm(x)) + ff(norm(x))``, one norm shared by both sublayers.

    ``x`` is ``(B, T, d)``; ``attn``, ``ff`` and ``norm`` are plain functions
    ``(B, T, d) -> (B, T, d)`` returning a tensor (attention mixes positions). Recognised
    mistakes: the sequential Pre-LN wiring, the residual taken from ``norm(x)``, ``attn(...)[0]``,
    a sublayer reading the raw ``x``, no residual, ``x`` added twice, the norm after the sum,
    a sublayer left out.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    hint = ("which tensor does each sublayer read, and what does the residual add? In the "
            "parallel block both sublayers read the same input")  # fmt: skip
    cases = [
        _Case("batch 2, seq_len 3, d_model 5", _block_case(3, 2, 3, 5)[:4], hint=hint),
        _Case("batch 3, seq_len 6, d_model 4", _block_case(4, 3, 6, 4)[:4], hint=hint),
        _Case("batch 4, seq_len 2, d_model 7", _block_case(5, 4, 2, 7)[:4], hint=hint),
    ]

    def mistake(name: str) -> Fn:
        return lambda *a: _parallel(*a, mistake=name)

    mistakes = [
        ("this is the sequential Pre-LN block: in the parallel block the FFN does not see "
         "attention's output, both sublayers read norm(x) of the block's input", mistake("sequential")),
        (_NORMED_RESIDUAL_HINT, mistake("normed residual")),
        (_TUPLE_HINT, mistake("tuple")),
        ("your FFN reads the raw x: both sublayers read the normalised input", mistake("ff raw")),
        ("your attention reads the raw x: both sublayers read the normalised input", mistake("attn raw")),
        ("there is no residual connection: the sublayers' outputs are added to the stream x", mistake("no residual")),
        ("you added x twice, once per sublayer: the parallel block has ONE residual, x plus both outputs",
         mistake("two residuals")),
        ("you normalised after the sum (as Post-LN does); here the norm is applied to the "
         "sublayers' input", mistake("post")),
        ("your output has no attention term", mistake("ff only")),
        ("your output has no feed-forward term", mistake("attn only")),
    ]  # fmt: skip
    _check("check_parallel_block", fn, cases, _parallel, mistakes=mistakes)
