"""Chapter 6's self-checks: correct solutions pass, the typical mistakes are named."""

import math

import pytest
import torch

from mtlib import exercises
from mtlib.positional import RotaryEmbedding, alibi_bias, sinusoidal_table

# ---------------------------------------------------------------- sinusoidal rows at given positions


def good_rows(positions, d_model, base=10000.0):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angles = positions[:, None] / base ** (two_i / d_model)  # (n, d/2), float64
    pe = torch.zeros(len(positions), d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


def rows_from_page(positions, d_model, base=10000.0):  # the page's table, indexed
    return sinusoidal_table(int(positions.max()) + 1, d_model, base=base).double()[positions]


def rows_by_loops(positions, d_model, base=10000.0):
    return torch.tensor(
        [
            [
                f(p / base ** (2 * (c // 2) / d_model))
                for c, f in zip(range(d_model), [math.sin, math.cos] * d_model, strict=False)
            ]
            for p in positions.tolist()
        ],
        dtype=torch.float64,
    )


def rows_float32_angles(positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(0, d_model, 2) / d_model)  # float32
    angles = positions[:, None] * omega  # float32 angles
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2).double()  # too late


def rows_float32_out(positions, d_model, base=10000.0):
    return good_rows(positions, d_model, base).float()  # torch.zeros without dtype


def rows_halves(positions, d_model, base=10000.0):
    pe = good_rows(positions, d_model, base)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)


def rows_exponent_4i(positions, d_model, base=10000.0):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angles = positions[:, None] / base ** (2 * two_i / d_model)
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)


def rows_plus_one(positions, d_model, base=10000.0):
    return good_rows(positions + 1, d_model, base)


def rows_arange(positions, d_model, base=10000.0):
    return good_rows(torch.arange(len(positions)), d_model, base)


def rows_fixed_base(positions, d_model, base=10000.0):
    return good_rows(positions, d_model)


def test_correct_rows_pass(capsys):
    exercises.check_sinusoidal_positions(good_rows)
    exercises.check_sinusoidal_positions(rows_from_page)
    exercises.check_sinusoidal_positions(rows_by_loops)
    assert capsys.readouterr().out.count("all 4 cases passed") == 3


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (rows_float32_angles, r"case 4 of 4 .*\nHint: the error grows with the position"),
        (rows_float32_out, r"case 1 of 4 .*expected dtype torch.float64, got torch.float32"),
        (rows_halves, r"case 1 of 4 .*equivalent up to a permutation of channels \(tensor2tensor"),
        (rows_exponent_4i, r"case 1 of 4 .*your exponent is 4i / d_model"),
        (rows_plus_one, r"case 1 of 4 .*equals the reference row for p \+ 1"),
        (rows_arange, r"case 2 of 4 .*instead of the positions given"),
        (rows_fixed_base, r"case 3 of 4 .*you used 10000 whatever the base"),
    ],
)
def test_wrong_rows_are_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=r"(?s)" + message):
        exercises.check_sinusoidal_positions(wrong)


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


def halves_out_rope(x, positions):  # right pairs, output written as section 6.4's torch.cat
    d = x.shape[-1]
    theta = 10000 ** (-torch.arange(0, d, 2) / d)
    angles = positions[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
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
        (halves_out_rope, "your pairs are right, (x[2i], x[2i+1]), but the output is in halves"),
        (clockwise_rope, "wrong way"),
        (arange_rope, "instead of the positions given"),
    ],
)
def test_wrong_rope_is_named(wrong, message):
    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_rope_rotation(wrong)
    assert message in str(info.value)


# ---------------------------------------------------------------- ALiBi at given positions


def good_alibi_at(num_heads, q_positions, k_positions):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)  # (H,)
    distance = (q_positions[:, None] - k_positions[None, :]).abs()  # (Tq, Tk), exact integers
    return -slopes[None, :, None, None] * distance


def alibi_at_loops(num_heads, q_positions, k_positions):
    return torch.tensor(
        [
            [
                [-(2.0 ** (-8 * h / num_heads)) * abs(i - j) for j in k_positions.tolist()]
                for i in q_positions.tolist()
            ]
            for h in range(1, num_heads + 1)
        ]
    )[None]


def alibi_at_arange(num_heads, q_positions, k_positions):  # alibi_bias with the lengths
    return alibi_bias(num_heads, len(q_positions), len(k_positions))


def alibi_at_bloom(num_heads, q_positions, k_positions):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    bias = slopes[:, None, None] * k_positions[None, None, :].double()
    return bias.expand(-1, len(q_positions), -1)[None]


def alibi_at_float32_products(num_heads, q_positions, k_positions):  # m*i - m*j in float32
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    mi = slopes[:, None, None] * q_positions.float()[None, :, None]
    mj = slopes[:, None, None] * k_positions.float()[None, None, :]
    return -(mi - mj).abs()[None]


def alibi_at_signed(num_heads, q_positions, k_positions):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    return -slopes[None, :, None, None] * (q_positions[:, None] - k_positions[None, :])


def alibi_at_signed_other_way(num_heads, q_positions, k_positions):  # HF's memory - context
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    return -slopes[None, :, None, None] * (k_positions[None, :] - q_positions[:, None])


def alibi_at_sorted_keys(num_heads, q_positions, k_positions):  # sorts the positions first
    return good_alibi_at(num_heads, q_positions.sort().values, k_positions.sort().values)


def test_correct_alibi_at_positions_passes(capsys):
    exercises.check_alibi_positions(good_alibi_at)
    exercises.check_alibi_positions(alibi_at_loops)
    assert capsys.readouterr().out.count("all 4 cases passed") == 2


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (alibi_at_arange, r"case 2 of 4 .*Hint: you ignored the positions given"),
        (alibi_at_bloom, r"case 1 of 4 .*Hint: your bias is \+m_n \* j, Bloom's form \(the open question"),
        (alibi_at_float32_products, r"case 4 of 4 .*Hint: only the distance matters"),
        (alibi_at_signed, r"case 1 of 4 .*without the absolute value"),
        (alibi_at_signed_other_way, r"case 1 of 4 .*\(j - i\), without the absolute value"),
        (alibi_at_sorted_keys, r"case 3 of 4 .*Hint: the order of the rows and columns"),
    ],
)
def test_wrong_alibi_at_positions_is_named(wrong, message):
    with pytest.raises(exercises.CheckFailed, match=r"(?s)" + message):
        exercises.check_alibi_positions(wrong)


# ---------------------------------------------------------------- another device


def _on_meta(fn):
    return lambda *args: fn(*args).to("meta")


@pytest.mark.parametrize(
    ("checker", "good"),
    [
        ("check_sinusoidal_positions", good_rows),
        ("check_rope_rotation", good_rope),
        ("check_alibi_positions", good_alibi_at),
    ],
)
def test_a_result_on_another_device_fails_in_words(checker, good):
    """A tensor that cannot be read back (meta stands in for a device the test machine lacks)
    is a worded failure, not a raw NotImplementedError from the comparison."""
    with pytest.raises(
        exercises.CheckFailed,
        match=r"(?s)case 1 of \d .*meta device, which holds no values.*\nHint: the inputs are CPU",
    ):
        getattr(exercises, checker)(_on_meta(good))


def test_a_device_mismatch_in_the_learner_code_gets_the_device_hint():
    def rope_theta_on_meta(x, positions):
        d = x.shape[-1]
        theta = 10000 ** (-torch.arange(0, d, 2, device="meta") / d)  # the chapter's device
        return good_rope(x, positions) + (positions[:, None] * theta).sum() * 0

    with pytest.raises(
        exercises.CheckFailed, match=r"(?s)case 1 of 3 .*device.*\nHint: the inputs are CPU"
    ):
        exercises.check_rope_rotation(rope_theta_on_meta)
