"""Chapter 6's self-checks: correct solutions pass, the typical mistakes are named."""

import pytest
import torch

from mtlib import exercises
from mtlib.positional import RotaryEmbedding, alibi_bias, sinusoidal_table

# ---------------------------------------------------------------- sinusoidal table


def good_table(max_len, d_model):
    pos = torch.arange(max_len)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2)  # (d/2,)
    angles = pos / 10000 ** (two_i / d_model)  # (L, d/2)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


def mtlib_table(max_len, d_model):
    return sinusoidal_table(max_len, d_model)


def swapped_table(max_len, d_model):
    pe = good_table(max_len, d_model)
    return pe.view(max_len, -1, 2).flip(-1).reshape(max_len, d_model)


def exponent_i_table(max_len, d_model):
    pos = torch.arange(max_len)[:, None]
    i = torch.arange(d_model // 2)
    angles = pos / 10000 ** (i / d_model)  # forgot the 2
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)


def halves_table(max_len, d_model):
    pe = good_table(max_len, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)  # [sin | cos]


def transposed_table(max_len, d_model):
    return good_table(max_len, d_model).T


def test_correct_tables_pass(capsys):
    exercises.check_sinusoidal_encoding(good_table)
    exercises.check_sinusoidal_encoding(mtlib_table)
    assert "all 3 cases passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (swapped_table, "sine and cosine are swapped"),
        (exponent_i_table, "your exponent is i / d_model"),
        (halves_table, "all sines first"),
        (transposed_table, "expected output shape (7, 10), got (10, 7)"),
    ],
)
def test_wrong_tables_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_sinusoidal_encoding(wrong)
    assert message in str(info.value)


# ---------------------------------------------------------------- RoPE


def good_rope(x, positions):
    d = x.shape[-1]
    theta = 10000 ** (-torch.arange(0, d, 2) / d)  # (Dh/2,)
    angles = positions[:, None] * theta  # (T, Dh/2)
    a, b = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack(
        [a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()], -1
    )
    return rotated.flatten(-2)


def mtlib_rope(x, positions):  # mtlib with the paper's pairing, one position at a time
    rope = RotaryEmbedding(x.shape[-1], interleaved=True, max_len=200, base=10000.0)
    rows = [
        rope.rotate(
            x[..., t : t + 1, :].reshape(-1, 1, 1, x.shape[-1]), layout="BHTD", offset=int(p)
        )
        for t, p in enumerate(positions)
    ]
    return torch.cat(rows, dim=-2).reshape(x.shape)


def rotate_half_rope(x, positions):
    d = x.shape[-1]
    theta = 10000 ** (-torch.arange(0, d, 2) / d)
    angles = positions[:, None] * theta
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()], -1)


def clockwise_rope(x, positions):
    return good_rope(x, -positions)


def arange_rope(x, positions):
    return good_rope(x, torch.arange(x.shape[-2]))


def test_correct_rope_passes(capsys):
    exercises.check_rope_rotation(good_rope)
    exercises.check_rope_rotation(mtlib_rope)
    assert "all 3 cases passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (rotate_half_rope, "rotate half"),
        (clockwise_rope, "wrong way"),
        (arange_rope, "instead of the positions given"),
    ],
)
def test_wrong_rope_is_named(wrong, message):
    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_rope_rotation(wrong)
    assert message in str(info.value)


# ---------------------------------------------------------------- ALiBi


def good_alibi(num_heads, q_len, k_len):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)  # (H,)
    q_pos = torch.arange(k_len - q_len, k_len)[:, None]
    k_pos = torch.arange(k_len)[None, :]
    return -slopes[:, None, None] * (q_pos - k_pos).abs()[None]  # (H, Tq, Tk)


def good_alibi_4d(num_heads, q_len, k_len):
    return good_alibi(num_heads, q_len, k_len)[None]  # (1, H, Tq, Tk)


def mtlib_alibi(num_heads, q_len, k_len):
    return alibi_bias(num_heads, q_len, k_len, dtype=torch.float64)


def queries_first(num_heads, q_len, k_len):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    distance = (torch.arange(q_len)[:, None] - torch.arange(k_len)[None, :]).abs()
    return -(slopes[:, None, None] * distance)[None]


def positive_sign(num_heads, q_len, k_len):
    return -good_alibi_4d(num_heads, q_len, k_len)


def slopes_from_one(num_heads, q_len, k_len):
    return good_alibi_4d(num_heads, q_len, k_len) * 2.0 ** (8 / num_heads)


def signed_distance(num_heads, q_len, k_len):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    i = torch.arange(k_len - q_len, k_len)[:, None]
    j = torch.arange(k_len)[None, :]
    return (-slopes[:, None, None] * (i - j))[None]  # forgot the absolute value


def reversed_slopes(num_heads, q_len, k_len):
    return good_alibi(num_heads, q_len, k_len)[None].flip(1)  # shallowest head first


def future_minus_inf(num_heads, q_len, k_len):
    bias = good_alibi(num_heads, q_len, k_len)[None]
    i = torch.arange(k_len - q_len, k_len)[:, None]
    return bias.masked_fill(torch.arange(k_len)[None, :] > i, float("-inf"))


def test_correct_alibi_passes(capsys):
    exercises.check_alibi_bias(good_alibi_4d)
    exercises.check_alibi_bias(mtlib_alibi)
    assert "all 3 cases passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (queries_first, "your queries sit at positions 0"),
        (positive_sign, "wrong sign"),
        (slopes_from_one, "your slopes start at 1"),
        (signed_distance, "without the absolute value"),
        (reversed_slopes, "reverse order"),
        (future_minus_inf, "that is the causal mask's job"),
        (good_alibi, "expected output shape (1, 4, 5, 5), got (4, 5, 5)"),
    ],
)
def test_wrong_alibi_is_named(wrong, message):
    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_alibi_bias(wrong)
    assert message in str(info.value)
