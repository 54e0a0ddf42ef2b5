"""Chapter 1's exercises: softmax, soft dictionary lookup, Laplace kernel regression."""

import torch


def softmax(x, temperature=1.0):
    z = x / temperature
    z = z - z.max(dim=-1, keepdim=True).values  # softmax is unchanged; exp cannot overflow
    e = z.exp()
    return e / e.sum(dim=-1, keepdim=True)


def soft_lookup(queries, keys, values, key_mask):
    scores = queries @ keys.transpose(-2, -1)  # (B, m, n): one row per query
    scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))  # (B, 1, n): per key
    return torch.softmax(scores, dim=-1) @ values  # (B, m, d_v)


def laplace_regression(x_query, x_train, y_train, bandwidth):
    distance = (x_query[:, None] - x_train[None, :]).abs()  # (m, n)
    weights = torch.softmax(-distance / bandwidth, dim=-1)  # a softmax never divides 0 by 0
    return weights @ y_train  # (m,)
