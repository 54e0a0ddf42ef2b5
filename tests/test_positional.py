"""Tests of mtlib.positional: formulas, the properties the book claims, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from mtlib.positional import (
    LearnedEncoding,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalEncoding,
    alibi_bias,
    alibi_slopes,
    sinusoidal_table,
)

# ---------------------------------------------------------------------------- sinusoidal


def test_sinusoidal_matches_formula() -> None:
    d_model = 12
    pe = sinusoidal_table(50, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_sinusoidal_forward_adds_table_and_is_not_in_state_dict() -> None:
    enc = SinusoidalEncoding(d_model=10, max_len=40)
    x = torch.randn(3, 7, 10)
    assert_close(enc(x), x + enc.pe[:7])
    assert_close(enc.table(torch.arange(7)), enc.pe[:7])
    assert enc.table(5).shape == (10,)
    assert enc.state_dict() == {}  # non-persistent buffer: nothing environment-dependent saved


def test_sinusoidal_shift_is_a_fixed_rotation() -> None:
    """PE(pos + k) = M_k PE(pos) with M_k block-diagonal rotations independent of pos."""
    d_model, k = 16, 5
    pe = sinusoidal_table(200, d_model)
    freqs = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    m_k = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, w in enumerate(freqs.tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        # [sin(p+k)w, cos(p+k)w] = [[cos kw, sin kw], [-sin kw, cos kw]] @ [sin pw, cos pw]
        m_k[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    for pos in (0, 3, 17, 90, 150):
        assert_close(m_k @ pe[pos], pe[pos + k], atol=1e-12, rtol=0)
    assert_close(m_k @ m_k.T, torch.eye(d_model, dtype=torch.float64))  # a rotation
    # and M_a M_b = M_(a+b) is what "depends on k only" buys: shifting twice composes
    assert_close(m_k @ (m_k @ pe[11]), pe[11 + 2 * k], atol=1e-12, rtol=0)


def test_sinusoidal_decoding_step_uses_row_t() -> None:
    enc = SinusoidalEncoding(d_model=8, max_len=30)
    x = torch.randn(2, 9, 8)
    full = enc(x)
    for t in range(9):
        step = enc(x[:, t : t + 1], offset=t)
        assert_close(step, full[:, t : t + 1])
        assert_close(step - x[:, t : t + 1], enc.pe[t].expand(2, 1, 8))
    # The classic bug: every step at position 0. Row 0 differs from row 3.
    assert not torch.allclose(enc(x[:, 3:4], offset=0), full[:, 3:4])


def test_sinusoidal_float64_input_keeps_dtype() -> None:
    enc = SinusoidalEncoding(d_model=6, max_len=10)
    x = torch.randn(1, 4, 6, dtype=torch.float64)
    assert enc(x).dtype == torch.float64


def test_sinusoidal_bad_input() -> None:
    with pytest.raises(ValueError, match="d_model=7"):
        SinusoidalEncoding(d_model=7)
    with pytest.raises(ValueError, match="max_len"):
        sinusoidal_table(0, 4)
    enc = SinusoidalEncoding(d_model=4, max_len=10)
    with pytest.raises(ValueError, match=r"sequence length 11.*max_len=10"):
        enc(torch.zeros(1, 11, 4))
    with pytest.raises(ValueError, match=r"offset 8.*max_len=10"):
        enc(torch.zeros(1, 3, 4), offset=8)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        enc(torch.zeros(1, 3, 4), offset=-1)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq_len, d_model=4\), got \(3, 4\)"):
        enc(torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq_len, d_model=4\), got \(1, 3, 5\)"):
        enc(torch.zeros(1, 3, 5))
    with pytest.raises(TypeError, match=r"x must be a Tensor of shape \(batch, seq_len, d_model=4\), got list"):
        enc([[0.0] * 4])
    with pytest.raises(TypeError, match=r"x must be a floating-point Tensor"):
        enc(torch.zeros(1, 3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"positional argument"):  # offset and dropout are keyword-only
        enc(torch.zeros(1, 3, 4), 2)
    with pytest.raises(TypeError, match=r"positional argument"):
        SinusoidalEncoding(4, 10, 0.1)
    with pytest.raises(TypeError, match="positions must be integers"):
        enc.table(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="positions must lie"):
        enc.table(torch.tensor([10]))


# ---------------------------------------------------------------------------- learned


def test_learned_encoding_offset_and_errors() -> None:
    enc = LearnedEncoding(6, 12)  # 0.2: (d_model, max_len), like SinusoidalEncoding
    assert isinstance(enc.embedding, torch.nn.Embedding)
    assert (enc.d_model, enc.max_len) == (6, 12) and enc.embedding.weight.shape == (12, 6)
    x = torch.randn(2, 5, 6)
    full = enc(x)
    assert_close(full, x + enc.embedding.weight[:5])
    assert_close(enc(x[:, 2:4], offset=2), full[:, 2:4])
    with pytest.raises(ValueError, match=r"sequence length 13.*max_len=12"):
        enc(torch.zeros(1, 13, 6))
    with pytest.raises(ValueError, match="d_model=6"):
        enc(torch.zeros(1, 3, 4))
    with pytest.raises(TypeError, match=r"positional argument"):  # offset is keyword-only
        enc(x[:, 2:4], 2)
    dropped = LearnedEncoding(6, 12, dropout=0.5)
    assert dropped.dropout.p == 0.5 and (dropped.train()(x) == 0).any()


# ---------------------------------------------------------------------------- T5 buckets


def _bucket_by_definition(offset: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """One offset (key - query) at a time, from the description in Raffel et al. (2020), sec. 2.1:
    half the buckets per direction when bidirectional, the first half of those exact, the rest
    logarithmically spaced up to max_distance, and everything beyond in the last bucket."""
    if bidirectional:
        per_side = num_buckets // 2
        side, distance = (per_side if offset > 0 else 0), abs(offset)
    else:
        per_side, side, distance = num_buckets, 0, max(-offset, 0)
    exact = per_side // 2
    if distance < exact:
        return side + distance
    # float32, like the models trained with these buckets, so the edges agree bit for bit
    log_ratio = np.log(np.float32(distance) / np.float32(exact)) / np.float32(math.log(max_distance / exact))
    return side + min(exact + int(log_ratio * np.float32(per_side - exact)), per_side - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (10, 20)])
def test_t5_buckets_match_the_definition(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    rel = torch.arange(-300, 301)
    ours = RelativePositionBias.bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    expected = [_bucket_by_definition(int(r), bidirectional, num_buckets, max_distance) for r in rel]
    assert ours.tolist() == expected


def test_t5_bucket_known_values_and_properties() -> None:
    bucket = RelativePositionBias.bucket
    # bidirectional, 32 buckets: 16 per side, distances 0..7 exact, then log-spaced to 128
    rel = torch.tensor([0, -1, -7, -8, -16, -127, -128, -1000, 1, 7, 1000])
    assert bucket(rel).tolist() == [0, 1, 7, 8, 10, 15, 15, 15, 17, 23, 31]
    d = torch.arange(0, 400)
    back, fwd = bucket(-d), bucket(d)
    assert torch.all(back[1:] >= back[:-1])  # monotone in distance
    assert torch.equal(fwd[1:], back[1:] + 16)  # mirror image, in the other half
    assert int(back.max()) == 15 and int(fwd.max()) == 31
    # unidirectional: every future key shares bucket 0 with distance 0
    uni = bucket(torch.arange(-200, 50), bidirectional=False)
    assert torch.all(uni[200:] == 0)
    assert uni.min() >= 0 and uni.max() == 31


def test_relative_position_bias_forward() -> None:
    rpb = RelativePositionBias(num_heads=3, num_buckets=16, max_distance=40)
    bias = rpb(5, 9)
    assert bias.shape == (1, 3, 5, 9)
    # entry (h, i, j) is the embedding of bucket(j - (i + 4)), queries being the last 5
    b = RelativePositionBias.bucket(torch.tensor(2 - (1 + 4)), bidirectional=True, num_buckets=16, max_distance=40)
    assert_close(bias[0, :, 1, 2], rpb.relative_attention_bias.weight[b])
    assert_close(rpb(5, 9), rpb(9, 9)[:, :, 4:])
    assert_close(rpb(2, 9, offset=0), rpb(9, 9)[:, :, :2])
    assert rpb(4).shape == (1, 3, 4, 4)
    with pytest.raises(TypeError, match=r"positional argument"):  # offset is keyword-only
        rpb(2, 9, 0)
    with pytest.raises(TypeError, match=r"positional argument"):
        RelativePositionBias.bucket(torch.tensor([1]), True)


def test_relative_position_bias_bad_config() -> None:
    with pytest.raises(ValueError, match="num_buckets"):
        RelativePositionBias(2, num_buckets=2)
    with pytest.raises(ValueError, match="max_distance"):
        RelativePositionBias(2, num_buckets=32, max_distance=8)
    with pytest.raises(TypeError, match=r"positional argument"):  # sizes are keyword-only
        RelativePositionBias(2, 16, 40)


# ---------------------------------------------------------------------------- RoPE


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_scores_depend_only_on_relative_position(interleaved: bool) -> None:
    rope = RotaryEmbedding(head_dim=10, max_len=64, interleaved=interleaved)
    q = torch.randn(10, dtype=torch.float64)
    k = torch.randn(10, dtype=torch.float64)
    rope = rope.double()

    def score(m: int, n: int) -> torch.Tensor:
        qm = rope.rotate(q.view(1, 1, 1, 10), layout="BHTD", offset=m)
        kn = rope.rotate(k.view(1, 1, 1, 10), layout="BHTD", offset=n)
        return (qm * kn).sum()

    for m, n in [(0, 0), (3, 1), (1, 3), (7, 7)]:
        for shift in (1, 5, 20):
            assert_close(score(m, n), score(m + shift, n + shift), atol=1e-6, rtol=0)
    assert not torch.allclose(score(3, 1), score(1, 3))  # but it does depend on m - n


def test_rope_interleaved_matches_complex_formulation() -> None:
    """The paper: view channel pairs as complex numbers, multiply by e^{i m theta}."""
    head_dim, seq = 8, 6
    rope = RotaryEmbedding(head_dim, max_len=16, interleaved=True)
    x = torch.randn(2, 3, seq, head_dim)
    theta = 10000.0 ** (-torch.arange(0, head_dim, 2).double() / head_dim)  # (Dh/2,)
    angles = torch.arange(seq).double()[:, None] * theta  # (T, Dh/2)
    z = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous())  # (B,H,T,Dh/2)
    expected = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
    assert_close(rope.rotate(x, layout="BHTD"), expected.float(), atol=1e-5, rtol=1e-5)
    # the same tensor in (B, T, H, Dh) layout gets the same rotation
    assert_close(rope.rotate(x.transpose(1, 2), layout="BTHD").transpose(1, 2), expected.float(), atol=1e-5, rtol=1e-5)


def test_rope_conventions_differ_by_a_permutation() -> None:
    head_dim = 6
    half = RotaryEmbedding(head_dim, max_len=20)
    inter = RotaryEmbedding(head_dim, max_len=20, interleaved=True)
    perm = torch.tensor([0, 3, 1, 4, 2, 5])  # interleaved channel c <- half channel perm[c]
    x = torch.randn(2, 5, 7, head_dim)
    for layout in ("BHTD", "BTHD"):
        assert_close(
            inter.rotate(x[..., perm], layout=layout, offset=4),
            half.rotate(x, layout=layout, offset=4)[..., perm],
        )


def test_rope_rotate_offset_and_norm() -> None:
    # 0.2: no forward(q, k); queries and keys are rotated one at a time with a named layout
    rope = RotaryEmbedding(head_dim=4, max_len=32)
    assert RotaryEmbedding.forward is torch.nn.Module.forward  # not overridden any more
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4)
    q_rot, k_rot = rope.rotate(q, layout="BHTD"), rope.rotate(k, layout="BHTD")
    assert q_rot.shape == q.shape and k_rot.shape == k.shape
    assert_close(q_rot.norm(dim=-1), q.norm(dim=-1))  # rotations preserve length
    assert_close(rope.rotate(k[:, :, 3:], layout="BHTD", offset=3), k_rot[:, :, 3:])  # a cached step
    assert_close(rope.rotate(q[:, :, :1], layout="BHTD", offset=0), q[:, :, :1])  # position 0: identity
    # BTHD: positions on dim 1, the same angle for every head
    k_bthd = k.transpose(1, 2)  # (B, T, H, Dh)
    assert_close(rope.rotate(k_bthd, layout="BTHD"), k_rot.transpose(1, 2))
    assert_close(rope.rotate(k_bthd[:, 3:], layout="BTHD", offset=3), k_rot.transpose(1, 2)[:, 3:])
    # the silent bug the named layout prevents: reading (B, T, H, Dh) as (B, H, T, Dh)
    assert not torch.allclose(rope.rotate(k_bthd, layout="BHTD"), k_rot.transpose(1, 2))
    assert rope.state_dict() == {}


def test_rope_bad_input() -> None:
    with pytest.raises(ValueError, match="head_dim"):
        RotaryEmbedding(head_dim=7)
    with pytest.raises(TypeError, match=r"positional argument"):  # options are keyword-only
        RotaryEmbedding(4, 10000.0)
    rope = RotaryEmbedding(head_dim=4, max_len=8)
    with pytest.raises(ValueError, match=r"x must have shape \(B, H, T, head_dim=4\), got \(1, 2, 3, 6\)"):
        rope.rotate(torch.zeros(1, 2, 3, 6), layout="BHTD")
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, H, head_dim=4\), got \(1, 2, 3, 6\)"):
        rope.rotate(torch.zeros(1, 2, 3, 6), layout="BTHD")
    with pytest.raises(ValueError, match=r"sequence length 9.*max_len=8"):
        rope.rotate(torch.zeros(1, 2, 9, 4), layout="BHTD")
    with pytest.raises(ValueError, match=r"sequence length 9.*max_len=8"):
        rope.rotate(torch.zeros(1, 9, 2, 4), layout="BTHD")
    with pytest.raises(ValueError, match=r"offset 6.*max_len=8"):
        rope.rotate(torch.zeros(1, 2, 3, 4), layout="BHTD", offset=6)
    # 0.2: the layout has no default, and x must be 4-D
    with pytest.raises(TypeError, match=r"layout"):
        rope.rotate(torch.zeros(1, 2, 3, 4))  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r'layout must be "BHTD" or "BTHD", got \'BHDT\''):
        rope.rotate(torch.zeros(1, 2, 3, 4), layout="BHDT")
    with pytest.raises(ValueError, match=r"x must have shape \(B, H, T, head_dim=4\), got \(3, 4\)"):
        rope.rotate(torch.zeros(3, 4), layout="BHTD")
    with pytest.raises(ValueError, match=r"got \(2, 3, 4\)"):
        rope.rotate(torch.zeros(2, 3, 4), layout="BHTD")


# ---------------------------------------------------------------------------- ALiBi


def test_alibi_slopes_match_paper() -> None:
    assert alibi_slopes(8).tolist() == [2.0**-i for i in range(1, 9)]
    assert alibi_slopes(16).tolist() == pytest.approx([2.0 ** (-i / 2) for i in range(1, 17)])
    # non-power-of-2 (reference code): slopes of 4 heads, then every other slope of 8 heads
    assert alibi_slopes(6).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
    assert alibi_slopes(5).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2]
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(0)


def test_alibi_bias_values() -> None:
    bias = alibi_bias(3, q_len=2, k_len=5)
    assert bias.shape == (1, 3, 2, 5)
    slopes = alibi_slopes(3).float()
    # queries sit at positions 3 and 4
    for h in range(3):
        for i, qpos in enumerate((3, 4)):
            for j in range(5):
                assert bias[0, h, i, j].item() == pytest.approx(-slopes[h].item() * abs(qpos - j))
    assert_close(alibi_bias(3, 5), alibi_bias(3, 5, 5))
    assert alibi_bias(2, 3, dtype=torch.float64).dtype == torch.float64
    assert alibi_bias(2, 3, 4, device="meta").device.type == "meta"
    with pytest.raises(TypeError, match=r"positional argument"):  # device and dtype are keyword-only
        alibi_bias(2, 3, 4, "cpu")
    with pytest.raises(ValueError, match="k_len must be >= q_len"):
        alibi_bias(2, q_len=4, k_len=3)
