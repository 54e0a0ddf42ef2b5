"""Chapter 15's exercises: Transformer-XL's rel-shift and its memory update."""

import torch


def rel_shift(x):
    *lead, t, k = x.shape  # column c of row i holds distance k - 1 - c
    padded = torch.nn.functional.pad(x, (1, 0)).reshape(
        *lead, k + 1, t
    )  # one zero column, then re-read the rows
    return padded[..., 1:, :].reshape(*lead, t, k)  # row i now starts at distance i + k - t


def update_memory(mem, hidden, mem_len):
    both = torch.cat([mem, hidden], dim=1).detach()  # (B, M + T, d); no gradient into the past
    return both[:, max(0, both.shape[1] - mem_len) :]  # the newest mem_len positions
