"""Chapter 6's exercises: the sinusoidal table (and its rows at given positions), the RoPE rotation, the ALiBi bias (and at given positions)."""

import torch


def sinusoidal_encoding(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angles = pos / 10000.0 ** (two_i / d_model)  # (L, d/2)
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table


def rope_rotation(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (Dh/2,)
    angles = positions.double()[:, None] * theta  # (T, Dh/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)  # (..., T, Dh)


def alibi_bias(num_heads, q_len, k_len):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)  # (H,)
    q_pos = torch.arange(k_len - q_len, k_len)[:, None]  # (Tq, 1): the last q_len positions
    k_pos = torch.arange(k_len)[None, :]  # (1, Tk)
    return -slopes[None, :, None, None] * (q_pos - k_pos).abs()  # (1, H, Tq, Tk)


def sinusoidal_positions(positions, d_model, base=10000.0):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angles = positions.double()[:, None] / base ** (two_i / d_model)  # (n, d/2), float64
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # (n, d): sin cos ...


def alibi_positions(num_heads, q_positions, k_positions):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)  # (H,)
    distance = (q_positions[:, None] - k_positions[None, :]).abs()  # (Tq, Tk): exact integers
    return -slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)
