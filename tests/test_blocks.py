"""Tests of mtlib.blocks: parity with PyTorch's layers, Post-LN vs Pre-LN, the decoder cache.

Sizes are distinct on purpose: d_model=15 with 3 or 5 heads, d_ff=22, target length 5 and
source length 7, so that a transposed dimension cannot go unnoticed.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import masks
from mtlib.attention import KVCache
from mtlib.blocks import (
    TORCH_RENAMES,
    BlockConfig,
    DecoderBlock,
    DecoderCache,
    EncoderBlock,
    FeedForward,
    load_torch_layers,
    torch_layer_config,
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


def config(num_heads: int = 3, **overrides: object) -> BlockConfig:
    """A block config of the test sizes; dropout 0 unless asked (BlockConfig's default is 0.1)."""
    return BlockConfig(**{"d_model": D, "num_heads": num_heads, "d_ff": FF, "dropout": 0.0, **overrides})


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
    with pytest.raises(TypeError, match=r"positional argument"):  # options are keyword-only
        FeedForward(D, FF, 0.1)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_model": D, "d_ff": 0}, ValueError, r"d_ff must be >= 1, got 0"),
        ({"d_model": 0, "d_ff": FF}, ValueError, r"d_model must be >= 1, got 0"),
        ({"d_model": 15.0, "d_ff": FF}, TypeError, r"d_model must be an int, got float"),
        ({"d_model": D, "d_ff": FF, "dropout": 1.0}, ValueError, r"dropout must be a float in \[0, 1\)"),
        ({"d_model": D, "d_ff": FF, "dropout": -0.1}, ValueError, r"dropout must be a float in \[0, 1\)"),
    ],
)
def test_feedforward_refuses_bad_settings(kwargs: dict, error: type, match: str) -> None:
    # d_ff=0 used to build a network that returns its bias whatever the input; dropout=1 one
    # that zeroes every hidden unit in training. BlockConfig refuses both; so does the module.
    d_model, d_ff = kwargs.pop("d_model"), kwargs.pop("d_ff")
    with pytest.raises(error, match=match):
        FeedForward(d_model, d_ff, **kwargs)


@pytest.mark.parametrize("activation", ["relu", "swiglu"])
def test_feedforward_checks_its_input(activation: str) -> None:
    # Before any matmul: a message that names the argument and the expected shape, not
    # "mat1 and mat2 shapes cannot be multiplied" or "expected both ... same dtype".
    ff = FeedForward(D, FF, activation=activation)
    with pytest.raises(ValueError, match=rf"x must have shape \(\.\.\., d_model={D}\), got \(2, 5, 14\)"):
        ff(torch.randn(B, T, D - 1))
    with pytest.raises(ValueError, match=r"x must have shape .* got \(\)"):
        ff(torch.tensor(1.0))
    with pytest.raises(TypeError, match=r"x must be a floating-point Tensor .* got dtype torch.int64"):
        ff(torch.ones(B, T, D, dtype=torch.long))
    with pytest.raises(TypeError, match=r"x must be a Tensor of shape \(\.\.\., d_model=15\), got list"):
        ff([[0.0] * D])
    assert ff(torch.randn(D)).shape == (D,)  # any leading shape, even none
    assert ff(torch.randn(3, B, T, D, dtype=torch.float64).float()).shape == (3, B, T, D)


def test_feedforward_dropout_on_hidden_units() -> None:
    ff = FeedForward(D, FF, dropout=0.5)
    x = torch.randn(B, T, D)
    assert ff.dropout.p == 0.5
    assert not torch.allclose(ff.train()(x), ff.eval()(x))
    close(ff.eval()(x), ff.linear2(F.relu(ff.linear1(x))))


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
    close(ours(x, mask=mask), expected)
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
    close(ours(x, memory, self_mask=self_mask, memory_mask=masks.from_key_padding_mask(mem_kpm)), expected)


def test_from_torch_rejects_what_it_cannot_load() -> None:
    with pytest.raises(TypeError, match="nn.TransformerEncoderLayer"):
        EncoderBlock.from_torch(nn.Linear(3, 4))
    with pytest.raises(TypeError, match="nn.TransformerDecoderLayer"):
        DecoderBlock.from_torch(nn.TransformerEncoderLayer(D, 3, FF, batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, 3, FF))
    with pytest.raises(ValueError, match="relu or gelu"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, 3, FF, activation=nn.Tanh(), batch_first=True))



@pytest.mark.parametrize("training", [False, True])
def test_block_from_torch_keeps_the_training_mode(training: bool) -> None:
    # issue 25: an eval-mode layer with dropout used to give a train-mode copy
    torch.manual_seed(0)
    enc = nn.TransformerEncoderLayer(D, 3, FF, dropout=0.3, batch_first=True).train(training)
    dec = nn.TransformerDecoderLayer(D, 5, FF, dropout=0.3, batch_first=True).train(training)
    ours_enc, ours_dec = EncoderBlock.from_torch(enc), DecoderBlock.from_torch(dec)
    for block in (ours_enc, ours_dec):
        assert all(m.training is training for m in block.modules())
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    if training:  # dropout on: two calls differ
        assert not torch.allclose(ours_dec(x, memory), ours_dec(x, memory))
    else:
        close(ours_enc(memory), enc(memory))
        close(ours_dec(x, memory, self_mask=masks.causal_mask(T)), dec(x, memory, tgt_is_causal=True,
              tgt_mask=nn.Transformer.generate_square_subsequent_mask(T)))  # fmt: skip


def test_block_from_torch_refuses_sequence_first_layers() -> None:
    # issue 25: the error names the layout and what to do
    for block, layer in ((EncoderBlock, nn.TransformerEncoderLayer(D, 3, FF)),
                         (DecoderBlock, nn.TransformerDecoderLayer(D, 5, FF))):  # fmt: skip
        with pytest.raises(ValueError, match=r"layer.self_attn has batch_first=False.*\(T, B, E\).*transpose"):
            block.from_torch(layer)

def test_torch_renames_and_load_torch_layers() -> None:
    # the weight tables of 0.1 became three renames plus split_in_proj (see test_loading.py)
    assert dict(TORCH_RENAMES) == {"linear1": "ff.linear1", "linear2": "ff.linear2", "multihead_attn": "cross_attn"}
    layer = randomize_(nn.TransformerDecoderLayer(D, 3, FF, batch_first=True))
    block = DecoderBlock(config())
    load_torch_layers(block, layer)
    theirs = dict(layer.named_parameters())
    ours = dict(block.named_parameters())
    assert torch.equal(ours["ff.linear1.weight"], theirs["linear1.weight"])
    assert torch.equal(ours["cross_attn.v_proj.bias"], theirs["multihead_attn.in_proj_bias"][2 * D :])
    assert torch.equal(ours["self_attn.k_proj.weight"], theirs["self_attn.in_proj_weight"][D : 2 * D])
    assert torch.equal(ours["norm3.weight"], theirs["norm3.weight"])
    with pytest.raises(ValueError, match="not written"):  # an encoder layer lacks the cross-attention
        load_torch_layers(block, nn.TransformerEncoderLayer(D, 3, FF, batch_first=True))
    with pytest.raises(ValueError, match=r"multihead_attn\.\S+ \(ours: cross_attn\.\S+\) has no counterpart in EncoderBlock"):
        load_torch_layers(EncoderBlock(config()), layer)  # a decoder layer has more
    with pytest.raises(ValueError, match=r"\.bias \(ours: \S+\.bias\) has no counterpart in EncoderBlock"):
        load_torch_layers(EncoderBlock(config(bias=False)), nn.TransformerEncoderLayer(D, 3, FF, batch_first=True))
    with pytest.raises(ValueError, match=r"shape mismatch copying linear1.weight into ff.linear1.weight"):
        load_torch_layers(EncoderBlock(config(d_ff=FF + 1)), nn.TransformerEncoderLayer(D, 3, FF, batch_first=True))


def test_torch_layer_config_reads_every_setting() -> None:
    ref = nn.TransformerDecoderLayer(D, 5, FF, dropout=0.25, activation="gelu", layer_norm_eps=1e-3,
                                     norm_first=True, bias=False, batch_first=True)  # fmt: skip
    assert torch_layer_config(ref) == BlockConfig(d_model=D, num_heads=5, d_ff=FF, dropout=0.25, activation="gelu",
                                                  norm_first=True, layer_norm_eps=1e-3, bias=False)  # fmt: skip


# ---------------------------------------------------------------------------- BlockConfig


def test_block_config_defaults_and_blocks_built_from_it() -> None:
    c = BlockConfig()
    assert (c.d_model, c.num_heads, c.d_ff, c.dropout, c.activation, c.norm_first, c.layer_norm_eps, c.bias) == (
        512, 8, 2048, 0.1, "relu", False, 1e-5, True)  # fmt: skip
    c = config(5, activation="gelu", norm_first=True, dropout=0.2, layer_norm_eps=1e-4, bias=False)
    enc, dec = EncoderBlock(c), DecoderBlock(c)
    for block in (enc, dec):
        assert block.self_attn.num_heads == 5 and block.self_attn.dropout == 0.2
        assert block.ff.activation_name == "gelu" and block.ff.linear1.weight.shape == (FF, D)
        assert block.norm_first and block.norm1.eps == 1e-4 and block.norm1.bias is None
        assert block.ff.linear1.bias is None and block.self_attn.q_proj.bias is None
        assert block.dropout1.p == 0.2 and block.ff.dropout.p == 0.2
    assert dec.cross_attn.num_heads == 5 and dec.dropout3.p == 0.2
    with pytest.raises(TypeError):  # 0.2: blocks take one config, not the sizes
        EncoderBlock(D, 3, FF)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("overrides", "exc", "match"),
    [
        ({"d_model": 0}, ValueError, r"d_model must be >= 1, got 0"),
        ({"num_heads": 0}, ValueError, r"num_heads must be >= 1, got 0"),
        ({"d_ff": -1}, ValueError, r"d_ff must be >= 1, got -1"),
        ({"d_model": 15.0}, TypeError, r"d_model must be an int, got float"),
        ({"num_heads": 4}, ValueError, r"d_model=15 must be divisible by num_heads=4"),
        ({"dropout": 1.0}, ValueError, r"dropout must be a float in \[0, 1\), got 1.0"),
        ({"dropout": -0.1}, ValueError, r"dropout must be a float in \[0, 1\)"),
        ({"activation": "Relu"}, ValueError, r"activation must be one of \['gelu', 'gelu_tanh', 'relu', 'swiglu'\], got 'Relu'"),
        ({"layer_norm_eps": 0.0}, ValueError, r"layer_norm_eps must be > 0, got 0.0"),
    ],
)
def test_block_config_validates_its_fields(overrides: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        config(**overrides)


# ---------------------------------------------------------------------------- Post-LN vs Pre-LN


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_follows_the_named_formula(norm_first: bool) -> None:
    block = randomize_(EncoderBlock(config(activation="swiglu", norm_first=norm_first))).eval()
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
    post = EncoderBlock(config(norm_first=False)).eval()(x)
    pre = EncoderBlock(config(norm_first=True)).eval()(x)
    close(post.mean(dim=-1), torch.zeros(B, S))  # fresh LayerNorm: mean 0 per token
    assert pre.mean(dim=-1).abs().min() > 0.1  # the residual stream is left unnormalised


# ---------------------------------------------------------------------------- decoder cache


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_cache_matches_full_recomputation(norm_first: bool) -> None:
    block = randomize_(DecoderBlock(config(5, norm_first=norm_first))).double().eval()
    x, memory = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    mem_mask = masks.from_key_padding_mask(key_padding([S, 4], S))
    full = block(x, memory, self_mask=masks.causal_mask(T), memory_mask=mem_mask)
    calls = []
    block.cross_attn.k_proj.register_forward_hook(lambda *args: calls.append(1))
    cache = DecoderCache()
    steps = [block(x[:, t : t + 1], memory, memory_mask=mem_mask, cache=cache) for t in range(T)]
    close(torch.cat(steps, dim=1), full)
    assert cache.length == T and cache.cross_attn.length == S
    assert len(calls) == 1  # the memory was projected once, on the first step
    # two tokens at once after a prefix of three: needs the offset causal mask
    cache2 = DecoderCache()
    block(x[:, :3], memory, self_mask=masks.causal_mask(3), memory_mask=mem_mask, cache=cache2)
    close(block(x[:, 3:], memory, self_mask=masks.causal_mask(2, 5), memory_mask=mem_mask, cache=cache2), full[:, 3:])


def test_decoder_cache_reorder_and_reset() -> None:
    block = DecoderBlock(config()).eval()
    x, memory = torch.randn(3, 2, D), torch.randn(3, S, D)
    cache = DecoderCache()
    block(x, memory, self_mask=masks.causal_mask(2), cache=cache)
    keys = cache.self_attn.k.clone()
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    torch.testing.assert_close(cache.self_attn.k, keys[index])
    assert cache.cross_attn.k.shape[0] == 3
    cache.reset()
    assert cache.length == 0 and not cache.cross_attn.filled



def test_decoder_cache_copies_and_reorders_are_independent_under_no_grad() -> None:
    # issue 25: copy.copy(DecoderCache) gave both branches the same KV caches; each branch,
    # stepped in turn without autograd (keys written in place), must see only its own tokens
    block = randomize_(DecoderBlock(config(5))).double().eval()
    prefix, memory = torch.randn(B, 3, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    tails = torch.randn(3, B, 2, D, dtype=torch.float64)

    def full(x: Tensor, memory: Tensor = memory) -> Tensor:  # the last position, from scratch
        return block(x, memory, self_mask=masks.causal_mask(x.shape[1]))[:, -1:]

    with torch.no_grad():
        cache = DecoderCache()
        for t in range(3):
            block(prefix[:, t : t + 1], memory, cache=cache)
        flipped = copy.copy(cache)
        flipped.reorder(torch.tensor([1, 0]))  # beam search's move: rows swapped
        branches = [cache, copy.copy(cache), copy.copy(cache)]
        assert branches[1].self_attn is not cache.self_attn
        for t in range(2):
            for tail, branch in zip(tails, branches, strict=True):
                out = block(tail[:, t : t + 1], memory, cache=branch)
                close(out, full(torch.cat([prefix, tail[:, : t + 1]], dim=1)))
            out = block(tails[0, :, t : t + 1], memory, cache=flipped)
            close(out, full(torch.cat([prefix.flip(0), tails[0, :, : t + 1]], dim=1), memory.flip(0)))
    assert cache.length == 5 and flipped.length == 5

def test_decoder_block_is_causal() -> None:
    block = DecoderBlock(config()).eval()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    out = block(x, memory, self_mask=masks.causal_mask(T))
    x2 = x.clone()
    x2[:, 3:] = torch.randn(B, T - 3, D)  # change the future
    out2 = block(x2, memory, self_mask=masks.causal_mask(T))
    close(out2[:, :3], out[:, :3])
    assert not torch.allclose(out2[:, 3:], out[:, 3:])


# ---------------------------------------------------------------------------- training, gradients


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_dropout_only_in_training(kind: str, norm_first: bool) -> None:
    """Training mode drops (two calls differ); eval mode is exactly the dropout-free block."""
    def build(dropout: float) -> nn.Module:
        torch.manual_seed(1)
        cls = EncoderBlock if kind == "encoder" else DecoderBlock
        return randomize_(cls(config(dropout=dropout, norm_first=norm_first)))

    block, no_dropout = build(0.5), build(0.0).eval()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    args = (x,) if kind == "encoder" else (x, memory)
    block.train()
    assert not torch.allclose(block(*args), block(*args))  # dropout is active...
    block.eval()
    torch.testing.assert_close(block(*args), no_dropout(*args), rtol=0, atol=0)  # ...and then off


class _DropAll(nn.Module):
    """A residual dropout that drops everything: what is left is the residual path alone."""

    def forward(self, h: Tensor) -> Tensor:
        return torch.zeros_like(h)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_dropout_wraps_each_whole_sublayer(norm_first: bool) -> None:
    """x + dropout(sublayer(.)): a residual dropout that drops everything leaves the input
    (Pre-LN) or its normalisation (Post-LN), in both blocks."""
    enc = randomize_(EncoderBlock(config(norm_first=norm_first))).eval()
    dec = randomize_(DecoderBlock(config(norm_first=norm_first))).eval()
    enc.dropout1, enc.dropout2 = _DropAll(), _DropAll()
    dec.dropout1, dec.dropout2, dec.dropout3 = _DropAll(), _DropAll(), _DropAll()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    if norm_first:
        close(enc(x), x)
        close(dec(x, memory), x)
    else:
        close(enc(x), enc.norm2(enc.norm1(x)))
        close(dec(x, memory), dec.norm3(dec.norm2(dec.norm1(x))))


def test_blocks_gradcheck_float64() -> None:
    small = BlockConfig(d_model=6, num_heads=3, d_ff=10, dropout=0.0)
    enc = EncoderBlock(replace(small, activation="gelu", norm_first=True)).double()
    dec = DecoderBlock(small).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(enc, (x,))
    assert torch.autograd.gradcheck(lambda a, m: dec(a, m, self_mask=masks.causal_mask(3)), (x, memory))


# ---------------------------------------------------------------------------- bad input


def test_blocks_reject_bad_input() -> None:
    enc, dec = EncoderBlock(config()), DecoderBlock(config())
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq_len, d_model=15\)"):
        enc(torch.randn(S, D))
    with pytest.raises(ValueError, match=r"d_model=15\), got \(2, 7, 14\)"):
        enc(torch.randn(B, S, D - 1))
    with pytest.raises(TypeError, match="floating-point"):
        enc(torch.ones(B, S, D, dtype=torch.long))
    with pytest.raises(TypeError, match="x must be a Tensor"):
        enc([[0.0] * D])
    with pytest.raises(ValueError, match=r"memory must have shape \(batch=2, src_len, d_model=15\) like x, got \(2, 7, 16\)"):
        dec(torch.randn(B, T, D), torch.randn(B, S, D + 1))
    with pytest.raises(ValueError, match=r"memory must have shape \(batch=2, src_len, d_model=15\) like x, got \(3, 7, 15\)"):
        dec(torch.randn(B, T, D), torch.randn(B + 1, S, D))
    with pytest.raises(TypeError, match=r"memory must be a floating-point Tensor"):
        dec(torch.randn(B, T, D), torch.ones(B, S, D, dtype=torch.long))
    with pytest.raises(ValueError, match="activation must be one of"):
        DecoderBlock(config(activation="Relu"))
    # 0.2: masks are keyword-only, bool only
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    with pytest.raises(TypeError, match=r"positional argument"):
        enc(x, masks.causal_mask(T))
    with pytest.raises(TypeError, match=r"positional argument"):
        dec(x, memory, masks.causal_mask(T))
    with pytest.raises(TypeError, match=r"mask must be a bool Tensor.*bias="):
        enc(x, mask=torch.zeros(T, T))
    with pytest.raises(TypeError, match=r"mask must be a bool Tensor"):
        dec(x, memory, memory_mask=torch.ones(B, 1, 1, S))
    with pytest.raises(ValueError, match=r"True means MAY attend"):
        dec(x, memory, self_mask=~masks.causal_mask(T))


# ---------------------------------------------------------------------------- decoder-only use


def test_gelu_tanh_is_gpt2_gelu() -> None:
    x = torch.linspace(-5, 5, 101, dtype=torch.float64)
    ff = FeedForward(D, FF, activation="gelu_tanh")
    gpt2 = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))  # GPT-2's formula
    torch.testing.assert_close(ff.activation(x), gpt2)
    assert not torch.allclose(ff.activation(x), F.gelu(x), atol=1e-4)  # not the exact GELU
    pickle.dumps(ff)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_causal_with_cache_equals_full(norm_first: bool) -> None:
    torch.manual_seed(0)
    block = randomize_(EncoderBlock(config(5, norm_first=norm_first, activation="gelu_tanh"))).double().eval()
    x = torch.randn(B, T, D, dtype=torch.float64)
    full = block(x, is_causal=True)
    explicit = block(x, mask=masks.causal_mask(T))
    close(full, explicit)
    cache = KVCache()
    prompt = block(x[:, :2], is_causal=True, cache=cache)  # a 2-token prompt, then one token at a time
    steps = [block(x[:, t : t + 1], cache=cache) for t in range(2, T)]
    close(torch.cat([prompt, *steps], dim=1), full)
    assert cache.length == T
    # without is_causal, position 0 sees the future: the outputs differ
    assert not torch.allclose(block(x)[:, 0], full[:, 0], atol=1e-3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_forward_with_weights_is_forward(norm_first: bool) -> None:
    torch.manual_seed(3)
    block = randomize_(EncoderBlock(config(5, norm_first=norm_first))).double().eval()
    x = torch.randn(B, T, D, dtype=torch.float64)
    mask = masks.padding_mask(torch.tensor([T, 3]), T)  # (B, 1, 1, T)
    out, weights = block.forward_with_weights(x, mask=mask, is_causal=True)
    close(out, block(x, mask=mask, is_causal=True))
    assert weights.shape == (B, 5, T, T)
    close(weights.sum(-1), torch.ones(B, 5, T, dtype=torch.float64))
    assert (weights.triu(1) == 0).all() and (weights[1, :, :, 3:] == 0).all()  # causal, padding
