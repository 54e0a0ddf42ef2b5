"""Chapter 4's exercises: the heads one at a time, PyTorch's packed projections, grouped-query attention."""

import torch


def multi_head_loop(query, key, value, params, num_heads):
    d_head = params["W_q"].shape[1] // num_heads
    heads = []
    for i in range(num_heads):
        cols = slice(i * d_head, (i + 1) * d_head)  # head i's columns: W^Q_i, W^K_i, W^V_i
        q = query @ params["W_q"][:, cols] + params["b_q"][cols]  # (B, Tq, Dh)
        k = key @ params["W_k"][:, cols] + params["b_k"][cols]  # (B, Tk, Dh)
        v = value @ params["W_v"][:, cols] + params["b_v"][cols]  # (B, Tk, Dh)
        weights = (q @ k.transpose(-2, -1) / d_head**0.5).softmax(dim=-1)  # (B, Tq, Tk)
        heads.append(weights @ v)  # (B, Tq, Dh)
    return torch.cat(heads, dim=-1) @ params["W_o"] + params["b_o"]  # (B, Tq, d_model)


def unpack_in_proj(state):
    w_q, w_k, w_v = state["in_proj_weight"].chunk(3, dim=0)  # (d_model, d_model) each, (out, in)
    b_q, b_k, b_v = state["in_proj_bias"].chunk(3, dim=0)  # (d_model,) each
    return {
        "W_q": w_q.T,  # the book's (d_in, d_out)
        "b_q": b_q,
        "W_k": w_k.T,
        "b_k": b_k,
        "W_v": w_v.T,
        "b_v": b_v,
        "W_o": state["out_proj.weight"].T,
        "b_o": state["out_proj.bias"],
    }


def grouped_query_attention(query, key, value, params, num_heads, num_kv_heads):
    B, Tq, d_model = query.shape
    Tk, d_head = key.shape[1], d_model // num_heads
    group = num_heads // num_kv_heads  # query heads per key/value head
    q = query @ params["W_q"] + params["b_q"]  # (B, Tq, d_model)
    k = key @ params["W_k"] + params["b_k"]  # (B, Tk, g * Dh)
    v = value @ params["W_v"] + params["b_v"]  # (B, Tk, g * Dh)
    q = q.view(B, Tq, num_kv_heads, group, d_head).permute(0, 2, 3, 1, 4)  # (B, g, h/g, Tq, Dh)
    k = k.view(B, Tk, num_kv_heads, 1, d_head).permute(0, 2, 3, 1, 4)  # (B, g, 1, Tk, Dh)
    v = v.view(B, Tk, num_kv_heads, 1, d_head).permute(0, 2, 3, 1, 4)  # (B, g, 1, Tk, Dh)
    weights = (q @ k.transpose(-2, -1) / d_head**0.5).softmax(dim=-1)  # (B, g, h/g, Tq, Tk)
    out = (weights @ v).permute(0, 3, 1, 2, 4).reshape(B, Tq, d_model)  # (B, Tq, h * Dh)
    return out @ params["W_o"] + params["b_o"]  # (B, Tq, d_model)
