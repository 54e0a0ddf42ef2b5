"""Chapter 3's exercises: scaled dot-product attention, a self-attention layer, entropy."""

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # True = may attend
    return scores.softmax(dim=-1) @ v  # (..., Tq, d_v)


def self_attention_layer(x, w_q, w_k, w_v, w_o):
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
    scores = q @ k.transpose(-2, -1) / w_q.shape[1] ** 0.5  # (..., T, T)
    return scores.softmax(dim=-1) @ v @ w_o  # (..., T, d_model)


def attention_entropy(weights):
    return -torch.xlogy(weights, weights).sum(dim=-1)  # 0 ln 0 = 0
