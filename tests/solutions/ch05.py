"""Chapter 5's exercises: the causal mask (fix the chapter's bug), padding, both combined."""

import torch


def causal_mask(n):
    # query i may attend to key j iff j <= i
    rows = torch.arange(n)[:, None]  # (n, 1)
    cols = torch.arange(n)[None, :]  # (1, n)
    return rows >= cols  # (n, n)


def padding_mask(lengths, max_len):
    real = torch.arange(max_len)[None, :] < lengths[:, None]  # (B, T)
    return real[:, None, None, :]  # (B, 1, 1, T)


def combined_mask(lengths, max_len):
    causal = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # (T, T)
    keys = (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    return causal & keys  # (B, 1, T, T)
