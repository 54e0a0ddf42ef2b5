"""The six silent mistakes found when mtlib 0.1 was used as a new user would (issue: mtlib 0.2).

Each one used to give a wrong answer without a word; each must now fail loudly or be right.
"""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from mtlib import masks
from mtlib.attention import MultiHeadAttention, masked_softmax, scaled_dot_product_attention
from mtlib.positional import RotaryEmbedding
from mtlib.transformer import Transformer

B, TQ, TK, D, H = 2, 5, 7, 12, 3


# 1. torch.tril(torch.ones(T, T)) as a mask: a float 0/1 tensor used to be taken as an additive
#    bias, so future keys kept their weight.
def test_float_01_causal_mask_is_refused_everywhere_with_the_conversion() -> None:
    float_causal = torch.tril(torch.ones(TQ, TQ))
    x = torch.randn(B, TQ, D)
    q = torch.randn(B, H, TQ, 4)
    calls = [
        lambda: scaled_dot_product_attention(q, q, q, mask=float_causal),
        lambda: masked_softmax(torch.randn(TQ, TQ), mask=float_causal),
        lambda: MultiHeadAttention(D, H)(x, mask=float_causal),
        lambda: MultiHeadAttention(D, H)(x, mask=float_causal.long()),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"mask\.bool\(\)"):
            call()


def test_the_converted_mask_is_causal_changing_a_later_token_changes_no_earlier_output() -> None:
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(1, TQ, D)
    mask = torch.tril(torch.ones(TQ, TQ)).bool()  # the conversion the error message suggests
    y = x.clone()
    y[:, 4] += 1.0
    assert_close(mha(x, mask=mask)[0][:, :4], mha(y, mask=mask)[0][:, :4])


# 2. mha(q, k, v, key_padding_mask) ported from nn.MultiheadAttention used to land in `mask`
#    with the opposite sign.
def test_positional_fourth_argument_is_refused() -> None:
    mha = MultiHeadAttention(D, H)
    x = torch.randn(1, TQ, D)
    kpm = torch.zeros(1, TQ, dtype=torch.bool)
    with pytest.raises(TypeError, match="positional argument"):
        mha(x, x, x, kpm)


# 3. scaled_dot_product_attention's 6th positional argument is `scale` here and `is_causal` in
#    PyTorch; nonsensical scales used to be accepted.
def test_sdpa_arguments_after_the_tensors_are_keyword_only() -> None:
    q = torch.randn(B, TQ, 4)
    with pytest.raises(TypeError, match="positional argument"):
        scaled_dot_product_attention(q, q, q, None, 0.0, True)  # type: ignore[misc]


@pytest.mark.parametrize("scale", [True, -1.0, 0, 0.0, float("inf"), float("nan"), "1"])
def test_sdpa_refuses_a_scale_that_is_not_a_positive_finite_number(scale: object) -> None:
    q = torch.randn(B, TQ, 4)
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        scaled_dot_product_attention(q, q, q, scale=scale)  # type: ignore[arg-type]


def test_sdpa_is_causal_matches_pytorch_when_square() -> None:
    q, k, v = torch.randn(3, B, H, TQ, 4)
    assert_close(
        scaled_dot_product_attention(q, k, v, is_causal=True),
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


# 4. RotaryEmbedding.rotate on a (B, T, H, Dh) tensor used to rotate by head index.
def test_rotate_needs_its_layout_named_and_both_layouts_agree() -> None:
    rope = RotaryEmbedding(head_dim=6, max_len=32)
    x_bthd = torch.randn(B, TK, H, 6)
    with pytest.raises(TypeError, match="layout"):
        rope.rotate(x_bthd)  # type: ignore[call-arg]
    by_position = rope.rotate(x_bthd.transpose(1, 2), layout="BHTD", offset=3).transpose(1, 2)
    assert_close(rope.rotate(x_bthd, layout="BTHD", offset=3), by_position)
    with pytest.raises(ValueError, match="layout"):
        rope.rotate(x_bthd, layout="BTDH")


def test_mha_with_rotary_scores_depend_on_relative_position_and_cache_offsets() -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, rotary=RotaryEmbedding(D // H, max_len=64)).eval()
    x = torch.randn(B, TK, D)
    full, _ = mha(x, is_causal=True)
    from mtlib.attention import KVCache

    cache = KVCache()
    steps = [mha(x[:, t : t + 1], cache=cache)[0] for t in range(TK)]
    assert_close(torch.cat(steps, dim=1), full)  # step t rotated at position t, not 0
    # Shifting every position by the same amount leaves relative-only scores unchanged.
    _, w = mha(x, need_weights=True)
    q = mha._split_heads(mha.q_proj(x))
    k = mha._split_heads(mha.k_proj(x))
    rope = mha.rotary
    assert rope is not None
    scores = rope.rotate(q, layout="BHTD", offset=9) @ rope.rotate(k, layout="BHTD", offset=9).transpose(-2, -1)
    assert_close((scores / (D // H) ** 0.5).softmax(-1).mean(1), w)


def test_rotary_must_match_the_head_width() -> None:
    with pytest.raises(ValueError, match=r"RotaryEmbedding\(head_dim=4\)"):
        MultiHeadAttention(D, H, rotary=RotaryEmbedding(6))


# 5. A PyTorch-sign boolean mask (~causal) used to give all-zero rows with no hint.
def test_an_inverted_causal_mask_is_refused_with_a_hint() -> None:
    x = torch.randn(B, TQ, D)
    with pytest.raises(ValueError, match="True means MAY attend"):
        MultiHeadAttention(D, H)(x, mask=~masks.causal_mask(TQ))
    q = torch.randn(B, H, TQ, 4)
    with pytest.raises(ValueError, match="from_attn_mask"):
        scaled_dot_product_attention(q, q, q, mask=torch.zeros(TQ, TQ, dtype=torch.bool))


def test_data_dependent_empty_rows_are_still_allowed_and_give_zeros() -> None:
    q = torch.randn(B, H, TQ, 4)
    mask = masks.combine(masks.causal_mask(TQ), masks.padding_mask(torch.tensor([TQ, 2]), TQ))
    mask = mask & torch.tensor([True, False])[:, None, None, None].logical_or(torch.arange(TQ)[:, None] > 0)
    out = scaled_dot_product_attention(q, q, q, mask=mask)
    assert torch.isfinite(out).all()


# 6. Transformer.from_torch(**overrides) used to store overrides in `config` that the modules
#    ignored.
def test_from_torch_overrides_either_apply_or_raise() -> None:
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=12, batch_first=True)
    for fixed in ({"num_heads": 4}, {"norm_first": True}, {"d_ff": 7}):
        with pytest.raises(ValueError, match="fixed by the PyTorch model"):
            Transformer.from_torch(model, src_vocab=5, tgt_vocab=6, **fixed)
    ours = Transformer.from_torch(model, src_vocab=5, tgt_vocab=6, max_len=33, pad_id=None)
    assert ours.positional.max_len == 33 and ours.config.max_len == 33
    assert ours.config.pad_id is None and ours.src_mask(torch.zeros(1, 3, dtype=torch.long)) is None
    assert ours.config.num_heads == ours.encoder.layers[0].self_attn.num_heads == 2
    assert len(ours.decoder.layers) == ours.config.num_decoder_layers == 2
