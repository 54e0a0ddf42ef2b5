"""Chapter 4, multi-head attention: the heads one at a time, PyTorch's packed projections, and
key/value heads shared by groups of query heads.

- :func:`check_multi_head_loop`: multi-head attention written as a Python loop over the heads,
  each head with its own columns of ``W_q``, ``W_k``, ``W_v``; compared with
  :class:`mtlib.attention.MultiHeadAttention` holding the same weights;
- :func:`check_unpack_in_proj`: ``nn.MultiheadAttention``'s ``state_dict()`` (one packed
  ``in_proj_weight``) turned into the book's ``params``; each entry is compared, then the layer
  with those ``params`` is compared with ``nn.MultiheadAttention`` itself;
- :func:`check_grouped_query_attention`: ``h`` query heads sharing ``g`` key/value heads
  (grouped-query attention; multi-query when ``g = 1``), as in the chapter's section 4.4.

``params`` follows section 4.3 and the notation page: a dict with ``W_q``, ``b_q``, ``W_k``,
``b_k``, ``W_v``, ``b_v``, ``W_o``, ``b_o``, each ``W`` of shape ``(d_in, d_out)`` (rows are
tokens, ``x @ W + b``). Every case has distinct sizes (``B != T_q != T_k != h != d_head``, and
``kdim != vdim != d_model`` where the layer allows it), so that a transposed weight or two
swapped axes fail instead of passing. The checkers build their inputs with their own random
generator (the global one is left alone) and compute the references in float64, on the inputs'
device; a result computed on another device is moved back before the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn as nn

from mtlib.attention import MultiHeadAttention
from mtlib.exercises._core import _call, _Case, _check, _describe, _fail

__all__ = ["check_grouped_query_attention", "check_multi_head_loop", "check_unpack_in_proj"]

_Params = dict[str, torch.Tensor]
_KEYS = ("W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o")


def _copying_params(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, called with copies of the tensors inside dict arguments (``_call`` copies only
    plain tensor arguments), and with a tensor result moved to the CPU."""
    if not callable(fn):
        return fn  # _check refuses it with its own message

    def wrapped(*args: Any) -> Any:
        copies = tuple(
            {name: t.clone() for name, t in a.items()} if isinstance(a, dict) else a for a in args
        )
        got = fn(*copies)
        return got.cpu() if isinstance(got, torch.Tensor) else got

    return wrapped


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale) v over the last two axes: (..., Tq, d), (..., Tk, d) -> (..., Tq, d_v)."""
    return (q @ k.transpose(-2, -1) * scale).softmax(dim=-1) @ v


def _random_params(
    g: torch.Generator, d_model: int, kdim: int, vdim: int, kv_width: int | None = None
) -> _Params:
    """Weights ``(d_in, d_out)`` scaled by 1/sqrt(d_in), and biases far from zero."""
    kv_width = d_model if kv_width is None else kv_width
    shapes = {"q": (d_model, d_model), "k": (kdim, kv_width), "v": (vdim, kv_width), "o": (d_model, d_model)}
    params: _Params = {}
    for name, (n_in, n_out) in shapes.items():
        params[f"W_{name}"] = torch.randn(n_in, n_out, generator=g) / math.sqrt(n_in)
        params[f"b_{name}"] = 0.5 * torch.randn(n_out, generator=g)
    return params


# --------------------------------------------------------------------------------------------
# 1. The heads one at a time
# --------------------------------------------------------------------------------------------


def _loop_layer(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    params: Mapping[str, torch.Tensor],
    num_heads: int,
    *,
    scale: float | None = None,
    strided: bool = False,
    biases: bool = True,
    output: bool = True,
    b_o_per_head: bool = False,
) -> torch.Tensor:
    """The layer head by head, in float64; the keyword arguments make the classic mistakes."""
    p = {name: t.double() for name, t in params.items()}
    d_model = p["W_q"].shape[1]
    d_head = d_model // num_heads
    scale = d_head**-0.5 if scale is None else scale
    heads = []
    for i in range(num_heads):
        cols = (
            torch.arange(i, d_model, num_heads, device=query.device)  # every h-th column: wrong
            if strided
            else torch.arange(i * d_head, (i + 1) * d_head, device=query.device)
        )
        q, k, v = (
            x.double() @ p[f"W_{n}"][:, cols] + (p[f"b_{n}"][cols] if biases else 0.0)
            for x, n in ((query, "q"), (key, "k"), (value, "v"))
        )  # (B, Tq, Dh), (B, Tk, Dh), (B, Tk, Dh)
        heads.append(_attend(q, k, v, scale))  # (B, Tq, Dh)
    concat = torch.cat(heads, dim=-1)  # (B, Tq, d_model)
    if not output:
        return concat
    out = concat @ p["W_o"] + p["b_o"]  # (B, Tq, d_model)
    return out + (num_heads - 1) * p["b_o"] if b_o_per_head else out


def _module_reference(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    params: Mapping[str, torch.Tensor],
    num_heads: int,
) -> torch.Tensor:
    """mtlib's MultiHeadAttention (its fused path) with ``params`` copied in, in float64."""
    d_model = params["W_q"].shape[1]
    with torch.random.fork_rng(devices=[]):  # building the module draws initial weights
        mha = MultiHeadAttention(
            d_model, num_heads, kdim=params["W_k"].shape[0], vdim=params["W_v"].shape[0]
        )
    mha = mha.double().to(query.device).eval()
    with torch.no_grad():
        for name, proj in (("q", mha.q_proj), ("k", mha.k_proj), ("v", mha.v_proj), ("o", mha.out_proj)):
            proj.weight.copy_(params[f"W_{name}"].T)  # nn.Linear stores (d_out, d_in)
            proj.bias.copy_(params[f"b_{name}"])
        out, _ = mha(query.double(), key.double(), value.double())
    return out  # (B, Tq, d_model)


def check_multi_head_loop(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(query, key, value, params, num_heads)``: multi-head attention, head by head.

    ``query`` ``(B, T_q, d_model)``, ``key`` ``(B, T_k, kdim)``, ``value`` ``(B, T_k, vdim)``;
    ``params`` as in section 4.3: ``W_q`` ``(d_model, d_model)``, ``W_k`` ``(kdim, d_model)``,
    ``W_v`` ``(vdim, d_model)``, ``W_o`` ``(d_model, d_model)``, every ``b_*`` ``(d_model,)``.
    Head ``i`` uses the columns ``i * d_head`` to ``(i + 1) * d_head - 1`` of ``W_q``, ``W_k``,
    ``W_v`` (and those entries of their biases), with ``d_head = d_model / num_heads``; the
    heads' outputs, concatenated in head order, go through ``W_o`` and ``b_o``. The result,
    ``(B, T_q, d_model)``, is compared with :class:`mtlib.attention.MultiHeadAttention` holding
    the same weights.

    Recognised mistakes: the scale ``1 / sqrt(d_model)``, every ``h``-th column for a head, no
    output projection, the biases left out, ``b_o`` added once per head.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(41)
    hint = (
        "head i uses only its own block of columns of W_q, W_k and W_v (and the same entries of "
        "b_q, b_k, b_v), with d_head = d_model / num_heads; the heads' outputs are concatenated "
        "along the features, head 0 first, before W_o. Try your loop with num_heads=1 against "
        "chapter 3's single head"
    )
    cases: list[_Case] = []
    for b, t_q, t_k, h, d_head, kdim, vdim in ((2, 5, 7, 3, 4, 6, 10), (3, 4, 6, 2, 5, 9, 7), (1, 6, 3, 4, 2, 5, 11)):
        d_model = h * d_head
        inputs = (
            torch.randn(b, t_q, d_model, generator=g),  # query
            torch.randn(b, t_k, kdim, generator=g),  # key
            torch.randn(b, t_k, vdim, generator=g),  # value
        )
        cases.append(
            _Case(
                f"B={b}, T_q={t_q}, T_k={t_k}, h={h}, d_head={d_head}, kdim={kdim}, vdim={vdim}",
                (*inputs, _random_params(g, d_model, kdim, vdim), h),
                hint=hint,
            )
        )
    mistakes: dict[str, Callable[..., torch.Tensor]] = {
        "you scaled the scores by 1/sqrt(d_model): a head's queries and keys have d_head = "
        "d_model / num_heads numbers, and its dot products sum that many terms": (
            lambda q, k, v, p, h: _loop_layer(q, k, v, p, h, scale=p["W_q"].shape[1] ** -0.5)
        ),
        "your head i took every num_heads-th column (i, i + h, i + 2h, ...): a head owns one "
        "contiguous block of d_head columns, the slice that the chapter's view/transpose gives it": (
            lambda q, k, v, p, h: _loop_layer(q, k, v, p, h, strided=True)
        ),
        "your output is the concatenation of the heads: the layer still mixes it with W_o and "
        "adds b_o": lambda q, k, v, p, h: _loop_layer(q, k, v, p, h, output=False),
        "your output is the layer without the biases b_q, b_k, b_v: each head adds its entries "
        "of them to its projections": lambda q, k, v, p, h: _loop_layer(q, k, v, p, h, biases=False),
        "your output adds b_o num_heads times, once per head; the layer adds it once": (
            lambda q, k, v, p, h: _loop_layer(q, k, v, p, h, b_o_per_head=True)
        ),
    }
    _check("check_multi_head_loop", _copying_params(fn), cases, _module_reference, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 2. PyTorch's packed in_proj_weight
# --------------------------------------------------------------------------------------------


def _unpacked(state: Mapping[str, torch.Tensor]) -> _Params:
    """The reference: the thirds q, k, v of the packed tensors, in the book's (d_in, d_out) layout."""
    w_q, w_k, w_v = state["in_proj_weight"].double().chunk(3, dim=0)  # (d_model, d_model), (out, in)
    b_q, b_k, b_v = state["in_proj_bias"].double().chunk(3, dim=0)  # (d_model,) each
    w_o, b_o = state["out_proj.weight"].double(), state["out_proj.bias"].double()
    return {"W_q": w_q.T, "b_q": b_q, "W_k": w_k.T, "b_k": b_k, "W_v": w_v.T, "b_v": b_v, "W_o": w_o.T, "b_o": b_o}


def _torch_output(
    state: Mapping[str, torch.Tensor], num_heads: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> torch.Tensor:
    """``nn.MultiheadAttention`` (batch first) holding ``state``, in float64."""
    d_model = state["out_proj.weight"].shape[0]
    with torch.random.fork_rng(devices=[]):  # building the module draws initial weights
        m = nn.MultiheadAttention(d_model, num_heads, batch_first=True, dtype=torch.float64)
    m = m.to(query.device).eval()
    m.load_state_dict({name: t.double() for name, t in state.items()})
    with torch.no_grad():
        out, _ = m(query.double(), key.double(), value.double(), need_weights=False)
    return out  # (B, Tq, d_model)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double().cpu(), b.double().cpu(), atol=1e-6, rtol=0)


def _entry_mistake(name: str, got: torch.Tensor, state: Mapping[str, torch.Tensor], expected: _Params) -> str:
    """A hint naming what ``got`` (the learner's ``params[name]``) is, when it is a known mistake."""
    d_model = expected["W_o"].shape[0]
    packed = "in_proj_weight" if name.startswith("W") else "in_proj_bias"
    whole = {(3 * d_model, d_model), (d_model, 3 * d_model), (3 * d_model,)}
    if name.startswith("W") and got.dim() == 2 and 3 * d_model in got.shape and tuple(got.shape) not in whole:
        return "you cut in_proj_weight along its second axis: the three projections are stacked along the first"
    if not name.endswith("_o") and tuple(got.shape) in whole:
        return f"params['{name}'] is the whole {packed} (3 * d_model rows): each projection has its own third of it"
    if name.startswith("W") and got.dtype.is_floating_point and _close(got, expected[name].T):
        stored = "out_proj.weight" if name == "W_o" else f"the {name[-1]} block of in_proj_weight"
        return (
            f"params['{name}'] is {stored} as PyTorch stores it, (out_features, in_features), like "
            "nn.Linear's weight; the book's W is (d_in, d_out): x @ W must equal F.linear(x, weight) "
            "(notation page). It is square, so its shape cannot tell you"
        )
    if name.startswith("b") and bool((got == 0).all()) and not bool((expected[name] == 0).all()):
        return (
            f"params['{name}'] is all zeros: a freshly built nn.MultiheadAttention has zero biases, "
            "a trained one (like these) does not; they are in the state dict too"
        )
    for other in (f"{name[0]}_{n}" for n in "qkv") if name[-1] in "qkv" else ():
        candidates = [expected[other], expected[other].T] if name.startswith("W") else [expected[other]]
        if other != name and got.dtype.is_floating_point and any(_close(got, c) for c in candidates):
            return (
                f"params['{name}'] holds the block of {other}: the three thirds of {packed} are "
                "in the order of the name (in_proj = q, k, v)"
            )
    if name.startswith("W") and name != "W_o" and got.dtype.is_floating_point:
        rows = state["in_proj_weight"].double().unflatten(0, (d_model, 3))  # (d_model, 3, d_model)
        if any(_close(got, rows[:, j]) or _close(got, rows[:, j].T) for j in range(3)):
            return (
                f"params['{name}'] takes every third row of in_proj_weight (an unflatten or view to "
                "(d_model, 3, d_model)): the projections are stacked as three whole blocks"
            )
    return ""


def check_unpack_in_proj(fn: Callable[[dict[str, torch.Tensor]], Mapping[str, torch.Tensor]]) -> None:
    """Check ``fn(state) -> params``: ``nn.MultiheadAttention``'s packed weights in the book's layout.

    ``state`` is the ``state_dict()`` of an ``nn.MultiheadAttention(d_model, h,
    batch_first=True)``: ``in_proj_weight`` ``(3 * d_model, d_model)`` (``W^Q``, ``W^K``,
    ``W^V`` stacked, each stored like ``nn.Linear``'s weight, ``(out, in)``), ``in_proj_bias``
    ``(3 * d_model,)``, ``out_proj.weight`` ``(d_model, d_model)`` and ``out_proj.bias``
    ``(d_model,)``, with biases that are not zero. Return the ``params`` of section 4.3: a dict
    with ``W_q``, ``b_q``, ``W_k``, ``b_k``, ``W_v``, ``b_v``, ``W_o``, ``b_o``, each ``W`` of
    shape ``(d_in, d_out)`` and each ``b`` ``(d_model,)``. Each entry is compared, then the layer
    ``softmax(Q K^T / sqrt(d_head)) V`` per head with these ``params`` is compared with
    ``nn.MultiheadAttention`` holding ``state``, on queries and keys of different lengths.

    Recognised mistakes: a block used as stored (no transpose; the blocks are square), the thirds
    in another order, every third row instead of a block, a cut along the wrong axis, the whole
    packed tensor, zero biases.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_unpack_in_proj"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    g = torch.Generator().manual_seed(42)
    hint = (
        "in_proj_weight stacks nn.MultiheadAttention's three input projections, each stored like "
        "nn.Linear's weight, (out_features, in_features); params uses the book's layout, (d_in, d_out)"
    )
    sizes = ((12, 3, 2, 5, 7), (10, 2, 3, 4, 6), (8, 4, 1, 6, 3))  # d_model, h, B, T_q, T_k
    for number, (d_model, h, b, t_q, t_k) in enumerate(sizes, start=1):
        state = {
            "in_proj_weight": torch.randn(3 * d_model, d_model, generator=g) / math.sqrt(d_model),
            "in_proj_bias": 0.5 * torch.randn(3 * d_model, generator=g),
            "out_proj.weight": torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model),
            "out_proj.bias": 0.5 * torch.randn(d_model, generator=g),
        }
        query = torch.randn(b, t_q, d_model, generator=g)
        key, value = torch.randn(b, t_k, d_model, generator=g), torch.randn(b, t_k, d_model, generator=g)
        case = _Case(f"d_model={d_model}, h={h}; B={b}, T_q={t_q}, T_k={t_k}", (state,), hint=hint)
        where = f"case {number} of {len(sizes)} ({case.description})"
        got = _call(checker, where, _copying_params(fn), case)
        if not isinstance(got, Mapping):
            kind = _describe(got) if isinstance(got, torch.Tensor) else f"a {type(got).__name__}"
            raise _fail(checker, where, f"expected a dict, got {kind}", "return a dict with the keys of section 4.3's params")
        missing = [name for name in _KEYS if name not in got]
        if missing:
            raise _fail(
                checker,
                where,
                "your dict has no key " + ", ".join(repr(name) for name in missing),
                "params needs all eight keys: " + ", ".join(_KEYS),
            )
        expected = _unpacked(state)
        for name in _KEYS:
            entry, at = got[name], f"{where}, params['{name}']"
            if not isinstance(entry, torch.Tensor):
                raise _fail(checker, at, f"expected a torch.Tensor, got {_describe(entry)}", "every entry is a tensor")
            entry = entry.detach().cpu()
            mistake = _entry_mistake(name, entry, state, expected)
            if tuple(entry.shape) != tuple(expected[name].shape):
                what = f"expected shape {tuple(expected[name].shape)}, got {tuple(entry.shape)}"
                raise _fail(checker, at, what, mistake or hint)
            if not entry.is_floating_point():
                raise _fail(checker, at, f"expected a floating-point tensor, got dtype {entry.dtype}")
            if not bool(torch.isfinite(entry).all()):
                raise _fail(checker, at, "contains NaN or inf", hint)
            error = (entry.double() - expected[name].cpu()).abs()
            if error.max() > 1e-6:
                worst = tuple(torch.nonzero(error == error.max())[0].tolist())
                what = f"values differ from the reference: largest error {error.max().item():.3g} at index {worst}"
                raise _fail(checker, at, what, mistake or hint)
        params = {name: got[name].detach().double().cpu() for name in _KEYS}
        ours = _loop_layer(query, key, value, params, h)
        gap = (ours - _torch_output(state, h, query, key, value)).abs().max().item()
        if gap > 1e-6:  # the entries match, so this would be a bug in the checker itself
            raise _fail(checker, where, f"the layer with your params differs from nn.MultiheadAttention by {gap:.3g}")
    print(f"{checker}: all {len(sizes)} cases passed.")


# --------------------------------------------------------------------------------------------
# 3. Grouped-query attention
# --------------------------------------------------------------------------------------------


def _gqa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    params: Mapping[str, torch.Tensor],
    num_heads: int,
    num_kv_heads: int,
    *,
    tiled: bool = False,
    scale_width: str = "d_head",
) -> torch.Tensor:
    """Section 4.4's repeat_interleave, in a whole layer (float64); the keywords make mistakes."""
    p = {name: t.double() for name, t in params.items()}
    batch, t_q, d_model = query.shape
    t_k, d_head = key.shape[1], d_model // num_heads
    group = num_heads // num_kv_heads
    q = (query.double() @ p["W_q"] + p["b_q"]).view(batch, t_q, num_heads, d_head).transpose(1, 2)  # (B, h, Tq, Dh)
    k = (key.double() @ p["W_k"] + p["b_k"]).view(batch, t_k, num_kv_heads, d_head).transpose(1, 2)  # (B, g, Tk, Dh)
    v = (value.double() @ p["W_v"] + p["b_v"]).view(batch, t_k, num_kv_heads, d_head).transpose(1, 2)  # (B, g, Tk, Dh)
    if tiled:  # query head i gets key/value head i mod g: wrong
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # (B, h, Tk, Dh)
    else:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, h, Tk, Dh)
    width = {"d_head": d_head, "kv": num_kv_heads * d_head, "d_model": d_model}[scale_width]
    out = _attend(q, k, v, width**-0.5)  # (B, h, Tq, Dh)
    return out.transpose(1, 2).reshape(batch, t_q, d_model) @ p["W_o"] + p["b_o"]  # (B, Tq, d_model)


def check_grouped_query_attention(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(query, key, value, params, num_heads, num_kv_heads)``: grouped-query attention.

    ``h = num_heads`` query heads share ``g = num_kv_heads`` key/value heads, each of
    ``d_head = d_model / h`` numbers: key/value head ``j`` serves the query heads ``j * h / g``
    to ``(j + 1) * h / g - 1`` (the order of ``repeat_interleave`` in section 4.4). ``params``
    as in section 4.3, except ``W_k`` ``(kdim, g * d_head)``, ``W_v`` ``(vdim, g * d_head)``
    and ``b_k``, ``b_v`` ``(g * d_head,)``. ``query`` ``(B, T_q, d_model)``, ``key``
    ``(B, T_k, kdim)``, ``value`` ``(B, T_k, vdim)``; the result is ``(B, T_q, d_model)``. The
    cases include multi-query (``g = 1``) and ordinary multi-head attention (``g = h``).

    Recognised mistakes: the tiled order (query head ``i`` with key/value head ``i mod g``, as
    ``.repeat`` gives), the scale ``1 / sqrt(g * d_head)`` or ``1 / sqrt(d_model)``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(43)
    hint = (
        "keys and values have num_kv_heads heads of d_head = d_model / num_heads numbers (the "
        "widths of W_k and W_v say so); consecutive query heads share a key/value head: heads "
        "0 to h/g - 1 use key/value head 0, the next h/g use head 1, and so on"
    )
    sizes = (  # B, T_q, T_k, h, g, d_head, kdim, vdim
        (3, 5, 7, 4, 2, 6, 10, 9),
        (2, 4, 9, 6, 3, 5, 8, 11),
        (2, 1, 6, 3, 1, 4, 5, 7),
        (1, 6, 3, 2, 2, 5, 7, 4),
    )
    cases: list[_Case] = []
    for b, t_q, t_k, h, kv, d_head, kdim, vdim in sizes:
        kind = "multi-head" if kv == h else "multi-query" if kv == 1 else "grouped-query"
        d_model = h * d_head
        inputs = (
            torch.randn(b, t_q, d_model, generator=g),  # query
            torch.randn(b, t_k, kdim, generator=g),  # key
            torch.randn(b, t_k, vdim, generator=g),  # value
        )
        cases.append(
            _Case(
                f"{kind}, h={h}, g={kv}; B={b}, T_q={t_q}, T_k={t_k}, d_head={d_head}",
                (*inputs, _random_params(g, d_model, kdim, vdim, kv_width=kv * d_head), h, kv),
                hint=hint,
            )
        )
    mistakes: dict[str, Callable[..., torch.Tensor]] = {
        "your query head i uses key/value head i mod num_kv_heads (the tiled order: what .repeat "
        "gives, and a view that groups the query heads i, i + g, i + 2g, ...); here consecutive "
        "query heads share one key/value head, as with repeat_interleave in section 4.4": (
            lambda q, k, v, p, h, kv: _gqa(q, k, v, p, h, kv, tiled=True)
        ),
        "you scaled the scores by 1/sqrt(num_kv_heads * d_head), the width of W_k's output; one "
        "head's dot products have d_head terms": (
            lambda q, k, v, p, h, kv: _gqa(q, k, v, p, h, kv, scale_width="kv")
        ),
        "you scaled the scores by 1/sqrt(d_model); one head's dot products have d_head terms": (
            lambda q, k, v, p, h, kv: _gqa(q, k, v, p, h, kv, scale_width="d_model")
        ),
    }
    _check("check_grouped_query_attention", _copying_params(fn), cases, _gqa, mistakes=mistakes)
