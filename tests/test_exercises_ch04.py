"""Chapter 4 self-checks: correct layers pass, written several ways; typical mistakes are caught
with a message that names them."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises
from mtlib.attention import MultiHeadAttention
from mtlib.exercises import ch04
from tests.solutions import ch04 as solutions


# ------------------------------------------------------------------- 1. the heads one at a time
def _head(x, params, name, cols, bias=True):  # x @ W_i + b_i for one head's columns
    return x @ params[f"W_{name}"][:, cols] + (params[f"b_{name}"][cols] if bias else 0.0)


def loop_project_then_slice(query, key, value, params, num_heads):  # project once, slice per head
    q = query @ params["W_q"] + params["b_q"]  # (B, Tq, d_model)
    k = key @ params["W_k"] + params["b_k"]  # (B, Tk, d_model)
    v = value @ params["W_v"] + params["b_v"]  # (B, Tk, d_model)
    d_head = q.shape[-1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        outs.append(F.scaled_dot_product_attention(q[..., s], k[..., s], v[..., s]))
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_sum_of_out_rows(query, key, value, params, num_heads):  # head_i W^O_i summed, b_o once
    d_head = params["W_q"].shape[1] // num_heads
    total = params["b_o"]
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        head = torch.softmax(torch.einsum("bqd,bkd->bqk", q, k) / d_head**0.5, dim=-1) @ v
        total = total + head @ params["W_o"][s]  # rows W^O_i multiply head i
    return total


def loop_without_b_k(query, key, value, params, num_heads):  # correct: q . b_k is the same for every key
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, v = _head(query, params, "q", s), _head(value, params, "v", s)
        k = _head(key, params, "k", s, bias=False)
        outs.append((q @ k.mT / d_head**0.5).softmax(-1) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_numpy_style_softmax(query, key, value, params, num_heads):  # exp / sum with the max removed
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        scores = q @ k.transpose(1, 2) / d_head**0.5
        e = (scores - scores.amax(-1, keepdim=True)).exp()
        outs.append(e / e.sum(-1, keepdim=True) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_scale_d_model(query, key, value, params, num_heads):
    d_model = params["W_q"].shape[1]
    d_head = d_model // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        outs.append((q @ k.mT / d_model**0.5).softmax(-1) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_strided_columns(query, key, value, params, num_heads):  # head i: columns i, i + h, ...
    outs = []
    for i in range(num_heads):
        s = slice(i, None, num_heads)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        outs.append((q @ k.mT / q.shape[-1] ** 0.5).softmax(-1) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_no_out_proj(query, key, value, params, num_heads):
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        outs.append((q @ k.mT / d_head**0.5).softmax(-1) @ v)
    return torch.cat(outs, -1)  # W_o and b_o forgotten


def loop_no_biases(query, key, value, params, num_heads):
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s, bias=False) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        outs.append((q @ k.mT / d_head**0.5).softmax(-1) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_b_o_per_head(query, key, value, params, num_heads):  # the sum form, b_o inside the loop
    d_head = params["W_q"].shape[1] // num_heads
    total = 0.0
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        head = (q @ k.mT / d_head**0.5).softmax(-1) @ v
        total = total + head @ params["W_o"][s] + params["b_o"]
    return total


def loop_softmax_over_queries(query, key, value, params, num_heads):
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        outs.append((q @ k.mT / d_head**0.5).softmax(dim=1) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


def loop_cat_over_tokens(query, key, value, params, num_heads):  # heads stacked along T
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q, k, v = (_head(x, params, n, s) for x, n in ((query, "q"), (key, "k"), (value, "v")))
        outs.append((q @ k.mT / d_head**0.5).softmax(-1) @ v)
    stacked = torch.cat(outs, dim=1)  # (B, h * Tq, d_head)
    return stacked @ params["W_o"] + params["b_o"]


def loop_rows_of_weights(query, key, value, params, num_heads):  # nn.Linear's layout assumed
    d_head = params["W_q"].shape[1] // num_heads
    outs = []
    for i in range(num_heads):
        s = slice(i * d_head, (i + 1) * d_head)
        q = query @ params["W_q"][s].T + params["b_q"][s]
        k = key @ params["W_k"][s].T + params["b_k"][s]
        v = value @ params["W_v"][s].T + params["b_v"][s]
        outs.append((q @ k.mT / d_head**0.5).softmax(-1) @ v)
    return torch.cat(outs, -1) @ params["W_o"] + params["b_o"]


# ------------------------------------------------------------------- 2. packed in_proj_weight
def unpack_split_mT(state):
    w_q, w_k, w_v = state["in_proj_weight"].split(state["out_proj.weight"].shape[0])
    b_q, b_k, b_v = state["in_proj_bias"].split(state["out_proj.weight"].shape[0])
    return dict(W_q=w_q.mT, b_q=b_q, W_k=w_k.mT, b_k=b_k, W_v=w_v.mT, b_v=b_v,
                W_o=state["out_proj.weight"].mT, b_o=state["out_proj.bias"])


def unpack_unflatten(state):  # (3, d, d) then swap the last two axes: contiguous copies
    w = state["in_proj_weight"].unflatten(0, (3, -1)).transpose(1, 2).contiguous()
    b = state["in_proj_bias"].unflatten(0, (3, -1))
    params = {f"W_{n}": w[j] for j, n in enumerate("qkv")} | {f"b_{n}": b[j] for j, n in enumerate("qkv")}
    return params | {"W_o": state["out_proj.weight"].t().clone(), "b_o": state["out_proj.bias"].clone()}


def unpack_by_index(state):  # slices by hand, keys in another order
    d = state["in_proj_weight"].shape[1]
    params = {"W_o": state["out_proj.weight"].transpose(0, 1), "b_o": state["out_proj.bias"]}
    for j, n in enumerate("qkv"):
        params[f"b_{n}"] = state["in_proj_bias"][j * d : (j + 1) * d]
        params[f"W_{n}"] = state["in_proj_weight"][j * d : (j + 1) * d].transpose(0, 1)
    return params


def unpack_as_stored(state):  # no transpose: the blocks are square, so the shapes look right
    w_q, w_k, w_v = state["in_proj_weight"].chunk(3)
    b_q, b_k, b_v = state["in_proj_bias"].chunk(3)
    return dict(W_q=w_q, b_q=b_q, W_k=w_k, b_k=b_k, W_v=w_v, b_v=b_v,
                W_o=state["out_proj.weight"], b_o=state["out_proj.bias"])


def unpack_out_proj_as_stored(state):
    return solutions.unpack_in_proj(state) | {"W_o": state["out_proj.weight"]}


def unpack_k_q_v(state):  # the thirds read in the order k, q, v
    w_k, w_q, w_v = state["in_proj_weight"].chunk(3)
    b_k, b_q, b_v = state["in_proj_bias"].chunk(3)
    return dict(W_q=w_q.T, b_q=b_q, W_k=w_k.T, b_k=b_k, W_v=w_v.T, b_v=b_v,
                W_o=state["out_proj.weight"].T, b_o=state["out_proj.bias"])


def unpack_rows_interleaved(state):  # unflatten to (d, 3): every third row
    w = state["in_proj_weight"].unflatten(0, (-1, 3))  # (d, 3, d)
    b = state["in_proj_bias"].unflatten(0, (-1, 3))  # (d, 3)
    return dict(W_q=w[:, 0].T, b_q=b[:, 0], W_k=w[:, 1].T, b_k=b[:, 1], W_v=w[:, 2].T, b_v=b[:, 2],
                W_o=state["out_proj.weight"].T, b_o=state["out_proj.bias"])


def unpack_zero_biases(state):  # biases taken from a fresh module: zeros
    params = solutions.unpack_in_proj(state)
    return params | {n: torch.zeros_like(params[n]) for n in ("b_q", "b_k", "b_v", "b_o")}


def unpack_cut_second_axis(state):
    w_q, w_k, w_v = state["in_proj_weight"].chunk(3, dim=1)  # (3d, d/3) each
    b_q, b_k, b_v = state["in_proj_bias"].chunk(3)
    return dict(W_q=w_q, b_q=b_q, W_k=w_k, b_k=b_k, W_v=w_v, b_v=b_v,
                W_o=state["out_proj.weight"].T, b_o=state["out_proj.bias"])


def unpack_weights_only(state):
    w_q, w_k, w_v = state["in_proj_weight"].chunk(3)
    return {"W_q": w_q.T, "W_k": w_k.T, "W_v": w_v.T, "W_o": state["out_proj.weight"].T}


def unpack_a_tuple(state):
    return tuple(solutions.unpack_in_proj(state).values())


def unpack_nan_bias(state):  # an uninitialised tensor (torch.empty) can hold NaN
    return solutions.unpack_in_proj(state) | {"b_v": torch.full((state["out_proj.bias"].shape[0],), float("nan"))}


def unpack_whole_bias(state):
    return solutions.unpack_in_proj(state) | {"b_q": state["in_proj_bias"]}


# ------------------------------------------------------------------- 3. grouped-query attention
def _project(query, key, value, params, num_heads, num_kv_heads):  # (B, h, Tq, Dh), (B, g, Tk, Dh) x 2
    d_head = query.shape[-1] // num_heads
    q = (query @ params["W_q"] + params["b_q"]).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    k = (key @ params["W_k"] + params["b_k"]).unflatten(-1, (num_kv_heads, d_head)).transpose(1, 2)
    v = (value @ params["W_v"] + params["b_v"]).unflatten(-1, (num_kv_heads, d_head)).transpose(1, 2)
    return q, k, v


def _finish(out, params):  # (B, h, Tq, Dh) -> (B, Tq, d_model)
    return out.transpose(1, 2).flatten(-2) @ params["W_o"] + params["b_o"]


def gqa_repeat_interleave(query, key, value, params, num_heads, num_kv_heads):  # the chapter's way
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    return _finish(F.scaled_dot_product_attention(q, k, v), params)


def gqa_expand(query, key, value, params, num_heads, num_kv_heads):  # Llama's repeat_kv
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    b, g, t, d = k.shape
    r = num_heads // num_kv_heads
    k = k[:, :, None].expand(b, g, r, t, d).reshape(b, g * r, t, d)
    v = v[:, :, None].expand(b, g, r, t, d).reshape(b, g * r, t, d)
    return _finish((q @ k.mT / d**0.5).softmax(-1) @ v, params)


def gqa_torch_enable_gqa(query, key, value, params, num_heads, num_kv_heads):  # PyTorch's own
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    return _finish(F.scaled_dot_product_attention(q, k, v, enable_gqa=True), params)


def gqa_head_loop(query, key, value, params, num_heads, num_kv_heads):  # index the shared head
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    r = num_heads // num_kv_heads
    outs = [
        (q[:, i] @ k[:, i // r].mT / q.shape[-1] ** 0.5).softmax(-1) @ v[:, i // r]
        for i in range(num_heads)
    ]
    return _finish(torch.stack(outs, dim=1), params)


def gqa_tiled(query, key, value, params, num_heads, num_kv_heads):  # .repeat: head i -> i mod g
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    r = num_heads // num_kv_heads
    return _finish(F.scaled_dot_product_attention(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)), params)


def gqa_grouped_wrong_way(query, key, value, params, num_heads, num_kv_heads):  # (h/g, g) view
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    b, h, t, d = q.shape
    q = q.view(b, h // num_kv_heads, num_kv_heads, t, d)  # heads i and i + g grouped: wrong
    out = (q @ k[:, None].mT / d**0.5).softmax(-1) @ v[:, None]
    return _finish(out.flatten(1, 2), params)


def gqa_scale_kv_width(query, key, value, params, num_heads, num_kv_heads):
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    width = params["W_k"].shape[1]  # g * d_head
    return _finish((q @ k.mT / width**0.5).softmax(-1) @ v, params)


def gqa_scale_d_model(query, key, value, params, num_heads, num_kv_heads):
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    return _finish((q @ k.mT / query.shape[-1] ** 0.5).softmax(-1) @ v, params)


def gqa_repeat_along_tokens(query, key, value, params, num_heads, num_kv_heads):
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, dim=2), v.repeat_interleave(r, dim=2)  # the wrong axis
    return _finish((q @ k.mT / q.shape[-1] ** 0.5).softmax(-1) @ v, params)


def gqa_values_not_shared(query, key, value, params, num_heads, num_kv_heads):
    q, k, v = _project(query, key, value, params, num_heads, num_kv_heads)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)  # keys shared, values forgotten
    return _finish((q @ k.mT / q.shape[-1] ** 0.5).softmax(-1) @ v, params)


def gqa_d_head_from_w_k(query, key, value, params, num_heads, num_kv_heads):
    d_head = params["W_k"].shape[1] // num_heads  # the keys' width split into h heads
    k = (key @ params["W_k"] + params["b_k"]).unflatten(-1, (num_kv_heads, d_head))
    return k.sum()


CORRECT = [
    (exercises.check_multi_head_loop, solutions.multi_head_loop, 3),
    (exercises.check_multi_head_loop, loop_project_then_slice, 3),
    (exercises.check_multi_head_loop, loop_sum_of_out_rows, 3),
    (exercises.check_multi_head_loop, loop_without_b_k, 3),
    (exercises.check_multi_head_loop, loop_numpy_style_softmax, 3),
    (exercises.check_unpack_in_proj, solutions.unpack_in_proj, 3),
    (exercises.check_unpack_in_proj, unpack_split_mT, 3),
    (exercises.check_unpack_in_proj, unpack_unflatten, 3),
    (exercises.check_unpack_in_proj, unpack_by_index, 3),
    (exercises.check_grouped_query_attention, solutions.grouped_query_attention, 4),
    (exercises.check_grouped_query_attention, gqa_repeat_interleave, 4),
    (exercises.check_grouped_query_attention, gqa_expand, 4),
    (exercises.check_grouped_query_attention, gqa_torch_enable_gqa, 4),
    (exercises.check_grouped_query_attention, gqa_head_loop, 4),
]


@pytest.mark.parametrize("checker, solution, cases", CORRECT, ids=[s.__name__ for _, s, _ in CORRECT])
def test_correct_solutions_pass_and_say_so(checker, solution, cases, capsys):
    assert checker(solution) is None
    assert capsys.readouterr().out.strip() == f"{checker.__name__}: all {cases} cases passed."


WRONG = [
    (
        exercises.check_multi_head_loop,
        loop_scale_d_model,
        r"case 1 of 3 .*known mistake\nHint: you scaled the scores by 1/sqrt\(d_model\)",
    ),
    (
        exercises.check_multi_head_loop,
        loop_strided_columns,
        r"case 1 of 3 .*known mistake\nHint: your head i took every num_heads-th column",
    ),
    (
        exercises.check_multi_head_loop,
        loop_no_out_proj,
        r"case 1 of 3 .*known mistake\nHint: your output is the concatenation of the heads",
    ),
    (
        exercises.check_multi_head_loop,
        loop_no_biases,
        r"case 1 of 3 .*known mistake\nHint: your output is the layer without the biases",
    ),
    (
        exercises.check_multi_head_loop,
        loop_b_o_per_head,
        r"case 1 of 3 .*known mistake\nHint: your output adds b_o num_heads times",
    ),
    (
        exercises.check_multi_head_loop,
        loop_softmax_over_queries,
        r"case 1 of 3 .*values differ.*\nHint: head i uses only its own block of columns",
    ),
    (
        exercises.check_multi_head_loop,
        loop_cat_over_tokens,
        r"case 1 of 3 .*raised RuntimeError.*\n  in your code, line \d+: return stacked @ params",
    ),
    (
        exercises.check_multi_head_loop,
        loop_rows_of_weights,
        r"case 1 of 3 .*raised RuntimeError.*\n  in your code, line \d+: k = key @ params",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_as_stored,
        r"case 1 of 3 .*params\['W_q'\]: values differ.*\nHint: params\['W_q'\] is the q block of "
        r"in_proj_weight as PyTorch stores it",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_out_proj_as_stored,
        r"case 1 of 3 .*params\['W_o'\]: values differ.*\nHint: params\['W_o'\] is out_proj.weight as "
        r"PyTorch stores it",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_k_q_v,
        r"case 1 of 3 .*params\['W_q'\]: values differ.*\nHint: params\['W_q'\] holds the block of W_k",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_rows_interleaved,
        r"case 1 of 3 .*params\['W_q'\]: values differ.*\nHint: params\['W_q'\] takes every third row",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_zero_biases,
        r"case 1 of 3 .*params\['b_q'\]: values differ.*\nHint: params\['b_q'\] is all zeros",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_cut_second_axis,
        r"case 1 of 3 .*params\['W_q'\]: expected shape \(12, 12\), got \(36, 4\)\nHint: you cut "
        r"in_proj_weight along its second axis",
    ),
    (
        exercises.check_unpack_in_proj,
        unpack_weights_only,
        r"case 1 of 3 .*your dict has no key 'b_q', 'b_k', 'b_v', 'b_o'",
    ),
    (exercises.check_unpack_in_proj, unpack_nan_bias, r"case 1 of 3 .*params\['b_v'\]: contains NaN"),
    (exercises.check_unpack_in_proj, unpack_a_tuple, r"case 1 of 3 .*expected a dict, got a tuple\nHint"),
    (
        exercises.check_unpack_in_proj,
        unpack_whole_bias,
        r"case 1 of 3 .*params\['b_q'\]: expected shape \(12,\), got \(36,\)\nHint: params\['b_q'\] "
        r"is the whole in_proj_bias",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_tiled,
        r"case 1 of 4 .*known mistake\nHint: your query head i uses key/value head i mod num_kv_heads",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_grouped_wrong_way,
        r"case 1 of 4 .*known mistake\nHint: your query head i uses key/value head i mod num_kv_heads",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_scale_kv_width,
        r"case 1 of 4 .*known mistake\nHint: you scaled the scores by 1/sqrt\(num_kv_heads \* d_head\)",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_scale_d_model,
        r"case 1 of 4 .*known mistake\nHint: you scaled the scores by 1/sqrt\(d_model\)",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_repeat_along_tokens,
        r"case 1 of 4 .*raised RuntimeError.*\nHint: keys and values have num_kv_heads heads",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_values_not_shared,
        r"case 1 of 4 .*raised RuntimeError.*\nHint: keys and values have num_kv_heads heads",
    ),
    (
        exercises.check_grouped_query_attention,
        gqa_d_head_from_w_k,
        r"case 1 of 4 .*raised RuntimeError.*unflatten.*\nHint: keys and values have num_kv_heads",
    ),
]


@pytest.mark.parametrize("checker, bad, match", WRONG, ids=[b.__name__ for _, b, _ in WRONG])
def test_typical_mistakes_are_caught_with_a_useful_message(checker, bad, match):
    with pytest.raises(exercises.CheckFailed, match=r"(?s)" + match):
        checker(bad)


# ------------------------------------------------------------------- the references themselves
def _case_inputs(seed=0, b=2, t_q=5, t_k=7, h=3, d_head=4, kdim=6, vdim=10, kv=None):
    g = torch.Generator().manual_seed(seed)
    d_model = h * d_head
    kv_width = None if kv is None else kv * d_head
    params = ch04._random_params(g, d_model, kdim, vdim, kv_width=kv_width)
    return (
        torch.randn(b, t_q, d_model, generator=g),
        torch.randn(b, t_k, kdim, generator=g),
        torch.randn(b, t_k, vdim, generator=g),
        params,
    )


def test_the_head_by_head_reference_equals_mtlibs_fused_layer():
    query, key, value, params = _case_inputs()
    torch.testing.assert_close(
        ch04._loop_layer(query, key, value, params, 3),
        ch04._module_reference(query, key, value, params, 3),
    )


def test_grouped_query_with_as_many_kv_heads_as_heads_is_mtlibs_layer():
    query, key, value, params = _case_inputs(seed=1, h=4, d_head=3, kv=4)
    torch.testing.assert_close(
        ch04._gqa(query, key, value, params, 4, 4), ch04._module_reference(query, key, value, params, 4)
    )


def test_the_unpacked_reference_reproduces_nn_multihead_attention():
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(12, 3, batch_first=True)
    with torch.no_grad():
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    query, key = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    params = ch04._unpacked(m.state_dict())
    expected, _ = m(query, key, key, need_weights=False)
    torch.testing.assert_close(ch04._loop_layer(query, key, key, params, 3).float(), expected)
    torch.testing.assert_close(ch04._torch_output(m.state_dict(), 3, query, key, key).float(), expected)
    assert MultiHeadAttention.from_torch(m)(query, key, key)[0].allclose(expected, atol=1e-6)


def test_the_checkers_leave_the_global_random_generator_alone(capsys):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    exercises.check_multi_head_loop(solutions.multi_head_loop)
    exercises.check_unpack_in_proj(solutions.unpack_in_proj)
    exercises.check_grouped_query_attention(solutions.grouped_query_attention)
    assert torch.equal(torch.get_rng_state(), before)


def test_an_edit_of_params_in_place_does_not_change_the_reference(capsys):
    def scales_in_place(query, key, value, params, num_heads):
        params["W_q"] /= 2  # a learner's in-place edit of the dict it was given
        return solutions.multi_head_loop(query, key, value, params, num_heads)

    with pytest.raises(exercises.CheckFailed, match="values differ"):
        exercises.check_multi_head_loop(scales_in_place)
