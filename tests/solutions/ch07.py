"""Chapter 7's exercises: the feed-forward network, LayerNorm, Post-LN and Pre-LN blocks."""

import torch


def feed_forward(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2  # (..., d_model)


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(dim=-1, keepdim=True)
    centred = x - mean  # subtract before squaring: no cancellation
    var = (centred**2).mean(dim=-1, keepdim=True)  # biased: divide by d
    return centred / (var + eps).sqrt() * gamma + beta


def post_ln_block(x, attn, ff, norm1, norm2):
    x = norm1(x + attn(x))
    return norm2(x + ff(x))


def pre_ln_block(x, attn, ff, norm1, norm2):
    x = x + attn(norm1(x))
    return x + ff(norm2(x))
