"""Chapter 6's exercises: the sinusoidal rows at given positions, the RoPE rotation, the ALiBi bias at given positions."""

import torch


def rope_rotation(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (Dh/2,)
    angles = positions.double()[:, None] * theta  # (T, Dh/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)  # (..., T, Dh)


def sinusoidal_positions(positions, d_model, base=10000.0):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angles = positions.double()[:, None] / base ** (two_i / d_model)  # (n, d/2), float64
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # (n, d): sin cos ...


def alibi_positions(num_heads, q_positions, k_positions):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)  # (H,)
    distance = (q_positions[:, None] - k_positions[None, :]).abs()  # (Tq, Tk): exact integers
    return -slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)
