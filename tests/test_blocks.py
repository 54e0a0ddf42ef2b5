"""Tests of mtlib.blocks: parity with PyTorch's layers, Post-LN vs Pre-LN, the decoder cache.

Sizes are distinct on purpose: d_model=15 with 3 or 5 heads, d_ff=22, target length 5 and
source length 7, so that a transposed dimension cannot go unnoticed.
"""

from __future__ import annotations

import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import masks
from mtlib.blocks import (
    DECODER_LAYER_PAIRS,
    ENCODER_LAYER_PAIRS,
    DecoderBlock,
    DecoderCache,
    EncoderBlock,
    FeedForward,
    copy_weights,
)
from tests.helpers import close

B, T, S, D, FF = 2, 5, 7, 15, 22  # batch, target length, source length, d_model, d_ff
DTYPES = [torch.float32, torch.float64]
VARIANTS = [(False, "relu"), (False, "gelu"), (True, "relu"), (True, "gelu")]  # (norm_first, act)


def randomize_(module: nn.Module) -> nn.Module:
    """PyTorch initialises biases to 0 and LayerNorms to (1, 0): make every copy visible."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.5)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
    return module


def key_padding(lengths: list[int], total: int) -> Tensor:
    """PyTorch's key_padding_mask (True = ignore) for right-padded sequences."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]  # (B, total)


# ---------------------------------------------------------------------------- FeedForward


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feedforward_matches_formula(activation: str) -> None:
    ff = FeedForward(D, FF, activation=activation)
    x = torch.randn(B, T, D)
    act = F.relu if activation == "relu" else F.gelu
    expected = ff.linear2(act(ff.linear1(x)))
    close(ff(x), expected)
    assert ff.linear1.weight.shape == (FF, D) and ff.linear2.weight.shape == (D, FF)


def test_feedforward_swiglu() -> None:
    ff = FeedForward(D, FF, activation="swiglu", bias=False)
    x = torch.randn(B, T, D)
    expected = ff.w2(F.silu(ff.w1(x)) * ff.w3(x))
    close(ff(x), expected)
    assert ff.w1.bias is None
    assert {n for n, _ in ff.named_parameters()} == {"w1.weight", "w2.weight", "w3.weight"}
    pickle.dumps(ff)  # no lambdas on modules


def test_feedforward_unknown_activation() -> None:
    with pytest.raises(ValueError, match=r"activation must be one of .*'tanh'"):
        FeedForward(D, FF, activation="tanh")


# ---------------------------------------------------------------------------- parity: encoder


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("norm_first", "activation"), VARIANTS)
def test_encoder_block_matches_torch(norm_first: bool, activation: str, dtype: torch.dtype) -> None:
    ref = nn.TransformerEncoderLayer(D, 3, FF, dropout=0.1, activation=activation,
                                     norm_first=norm_first, batch_first=True)  # fmt: skip
    ref = randomize_(ref).to(dtype).eval()
    ours = EncoderBlock.from_torch(ref).eval()
    assert (ours.norm_first, ours.ff.activation_name) == (norm_first, activation)
    x = torch.randn(B, S, D, dtype=dtype)
    kpm = key_padding([S, 4], S)  # second sequence has 3 padding positions
    attn_mask = torch.rand(S, S) < 0.3  # PyTorch: True = ignore
    attn_mask.fill_diagonal_(False)  # every query keeps at least itself
    expected = ref(x, src_mask=attn_mask, src_key_padding_mask=kpm)
    mask = masks.combine(masks.from_attn_mask(attn_mask), masks.from_key_padding_mask(kpm))
    close(ours(x, mask), expected)
    close(ours(x), ref(x))  # and without any mask


def test_encoder_block_reads_settings_and_bias_free_layers() -> None:
    ref = nn.TransformerEncoderLayer(D, 5, FF, dropout=0.0, layer_norm_eps=1e-3, bias=False,
                                     batch_first=True)  # fmt: skip
    ref = randomize_(ref).eval()
    ours = EncoderBlock.from_torch(ref).eval()
    assert ours.norm1.eps == 1e-3 and ours.ff.linear1.bias is None and ours.norm2.bias is None
    assert ours.self_attn.num_heads == 5
    x = torch.randn(B, S, D)
    close(ours(x), ref(x))


# ---------------------------------------------------------------------------- parity: decoder


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("norm_first", "activation"), VARIANTS)
def test_decoder_block_matches_torch(norm_first: bool, activation: str, dtype: torch.dtype) -> None:
    ref = nn.TransformerDecoderLayer(D, 5, FF, dropout=0.1, activation=activation,
                                     norm_first=norm_first, batch_first=True)  # fmt: skip
    ref = randomize_(ref).to(dtype).eval()
    ours = DecoderBlock.from_torch(ref).eval()
    x, memory = torch.randn(B, T, D, dtype=dtype), torch.randn(B, S, D, dtype=dtype)
    tgt_kpm, mem_kpm = key_padding([T, 3], T), key_padding([4, S], S)
    expected = ref(x, memory, tgt_mask=~masks.causal_mask(T), tgt_key_padding_mask=tgt_kpm,
                   memory_key_padding_mask=mem_kpm)  # PyTorch: True = ignore  # fmt: skip
    self_mask = masks.combine(masks.causal_mask(T), masks.from_key_padding_mask(tgt_kpm))
    close(ours(x, memory, self_mask, masks.from_key_padding_mask(mem_kpm)), expected)


def test_from_torch_rejects_what_it_cannot_load() -> None:
    with pytest.raises(TypeError, match="nn.TransformerEncoderLayer"):
        EncoderBlock.from_torch(nn.Linear(3, 4))
    with pytest.raises(TypeError, match="nn.TransformerDecoderLayer"):
        DecoderBlock.from_torch(nn.TransformerEncoderLayer(D, 3, FF, batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, 3, FF))
    with pytest.raises(ValueError, match="relu or gelu"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, 3, FF, activation=nn.Tanh(), batch_first=True))


def test_weight_tables_are_complete_and_checked() -> None:
    layer = nn.TransformerDecoderLayer(D, 3, FF, batch_first=True)
    block = DecoderBlock(D, 3, FF)
    source = dict(layer.named_parameters())
    copy_weights(block, source, DECODER_LAYER_PAIRS)  # the full table works
    with pytest.raises(ValueError, match="not written"):
        copy_weights(block, source, DECODER_LAYER_PAIRS[:-1])  # a row missing is caught
    with pytest.raises(ValueError, match="shape mismatch copying linear1.weight"):
        copy_weights(block, {**source, "linear1.weight": torch.zeros(FF + 1, D)}, DECODER_LAYER_PAIRS)
    with pytest.raises(ValueError, match="one side only"):
        copy_weights(EncoderBlock(D, 3, FF, bias=False), dict(nn.TransformerEncoderLayer(
            D, 3, FF, batch_first=True).named_parameters()), ENCODER_LAYER_PAIRS)  # fmt: skip


# ---------------------------------------------------------------------------- Post-LN vs Pre-LN


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_follows_the_named_formula(norm_first: bool) -> None:
    block = randomize_(EncoderBlock(D, 3, FF, activation="swiglu", norm_first=norm_first)).eval()
    x = torch.randn(B, S, D)
    attn = block.self_attn
    if norm_first:  # Pre-LN: x + sublayer(norm(x))
        h = x + attn(block.norm1(x))[0]
        expected = h + block.ff(block.norm2(h))
    else:  # Post-LN: norm(x + sublayer(x))
        h = block.norm1(x + attn(x)[0])
        expected = block.norm2(h + block.ff(h))
    close(block(x), expected)


def test_post_ln_output_is_normalised_pre_ln_is_not() -> None:
    x = 5.0 * torch.randn(B, S, D) + 3.0
    post = EncoderBlock(D, 3, FF, norm_first=False).eval()(x)
    pre = EncoderBlock(D, 3, FF, norm_first=True).eval()(x)
    close(post.mean(dim=-1), torch.zeros(B, S))  # fresh LayerNorm: mean 0 per token
    assert pre.mean(dim=-1).abs().min() > 0.1  # the residual stream is left unnormalised


# ---------------------------------------------------------------------------- decoder cache


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_cache_matches_full_recomputation(norm_first: bool) -> None:
    block = randomize_(DecoderBlock(D, 5, FF, norm_first=norm_first)).double().eval()
    x, memory = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    mem_mask = masks.from_key_padding_mask(key_padding([S, 4], S))
    full = block(x, memory, masks.causal_mask(T), mem_mask)
    calls = []
    block.cross_attn.k_proj.register_forward_hook(lambda *args: calls.append(1))
    cache = DecoderCache()
    steps = [block(x[:, t : t + 1], memory, None, mem_mask, cache) for t in range(T)]
    close(torch.cat(steps, dim=1), full)
    assert cache.length == T and cache.cross_attn.length == S
    assert len(calls) == 1  # the memory was projected once, on the first step
    # two tokens at once after a prefix of three: needs the offset causal mask
    cache2 = DecoderCache()
    block(x[:, :3], memory, masks.causal_mask(3), mem_mask, cache2)
    close(block(x[:, 3:], memory, masks.causal_mask(2, 5), mem_mask, cache2), full[:, 3:])


def test_decoder_cache_reorder_and_reset() -> None:
    block = DecoderBlock(D, 3, FF).eval()
    x, memory = torch.randn(3, 2, D), torch.randn(3, S, D)
    cache = DecoderCache()
    block(x, memory, masks.causal_mask(2), None, cache)
    keys = cache.self_attn.k.clone()
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    torch.testing.assert_close(cache.self_attn.k, keys[index])
    assert cache.cross_attn.k.shape[0] == 3
    cache.reset()
    assert cache.length == 0 and not cache.cross_attn.filled


def test_decoder_block_is_causal() -> None:
    block = DecoderBlock(D, 3, FF).eval()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    out = block(x, memory, masks.causal_mask(T))
    x2 = x.clone()
    x2[:, 3:] = torch.randn(B, T - 3, D)  # change the future
    out2 = block(x2, memory, masks.causal_mask(T))
    close(out2[:, :3], out[:, :3])
    assert not torch.allclose(out2[:, 3:], out[:, 3:])


# ---------------------------------------------------------------------------- training, gradients


def test_dropout_only_in_training() -> None:
    block = EncoderBlock(D, 3, FF, dropout=0.5)
    x = torch.randn(B, S, D)
    assert not torch.allclose(block.train()(x), block(x))
    block.eval()
    close(block(x), block(x))


def test_blocks_gradcheck_float64() -> None:
    enc = EncoderBlock(6, 3, 10, activation="gelu", norm_first=True).double()
    dec = DecoderBlock(6, 3, 10).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(enc, (x,))
    assert torch.autograd.gradcheck(lambda a, m: dec(a, m, masks.causal_mask(3)), (x, memory))


# ---------------------------------------------------------------------------- bad input


def test_blocks_reject_bad_input() -> None:
    enc, dec = EncoderBlock(D, 3, FF), DecoderBlock(D, 3, FF)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq_len, d_model=15\)"):
        enc(torch.randn(S, D))
    with pytest.raises(ValueError, match=r"d_model=15\), got \(2, 7, 14\)"):
        enc(torch.randn(B, S, D - 1))
    with pytest.raises(TypeError, match="floating-point"):
        enc(torch.ones(B, S, D, dtype=torch.long))
    with pytest.raises(TypeError, match="x must be a Tensor"):
        enc([[0.0] * D])
    with pytest.raises(ValueError, match=r"memory must have shape \(batch, seq_len, d_model=15\)"):
        dec(torch.randn(B, T, D), torch.randn(B, S, D + 1))
    with pytest.raises(ValueError, match="activation must be one of"):
        DecoderBlock(D, 3, FF, activation="Relu")
