"""Chapter 7's exercises: the SwiGLU width and FFN, RMSNorm, the parallel block."""

import torch


def swiglu_width(d_model, d_ff):
    # 3 * d_model * h == 2 * d_model * d_ff  <=>  h == 2 * d_ff / 3
    if (2 * d_ff) % 3 != 0:
        raise ValueError(f"no integer width: 2 * {d_ff} / 3 is not an integer")
    return 2 * d_ff // 3  # an int


def swiglu_ffn(x, w_gate, w_up, w_down):
    gate = torch.nn.functional.silu(x @ w_gate)  # (..., h): z * sigmoid(z), safe for large |z|
    return (gate * (x @ w_up)) @ w_down  # (..., d_model)


def rms_norm_by_hand(x, weight, eps):
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): one per vector, no centring
    return x / torch.sqrt(mean_square + eps) * weight


def parallel_block(x, attn, ff, norm):
    h = norm(x)  # one norm, read by both sublayers
    return x + attn(h) + ff(h)  # the residual adds the raw x
