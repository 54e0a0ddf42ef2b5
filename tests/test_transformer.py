"""Tests of mtlib.transformer: parity with nn.Transformer, decoding, masks, bad input.

Distinct sizes on purpose: source vocabulary 11, target vocabulary 13, d_model 30 with 5
heads, d_ff 44, source length 7, target length 6.
"""

from __future__ import annotations

import itertools
import math
import pickle

import pytest
import torch
from torch import Tensor, nn

from mtlib import masks
from mtlib.blocks import BlockConfig, DecoderCache
from mtlib.transformer import (
    Decoder,
    Encoder,
    Transformer,
    TransformerConfig,
    _best_beams,
    _length_penalty,
    beam_search,
    greedy_decode,
)
from tests.helpers import close

PAD, BOS, EOS = 0, 1, 2
NESTED_WARNING = "ignore:enable_nested_tensor is True"


def make_model(**overrides: object) -> Transformer:
    config = TransformerConfig.tiny(src_vocab=11, tgt_vocab=13, d_model=30, num_heads=5,
                                    d_ff=44, **overrides)  # fmt: skip
    return Transformer(config).eval()


def tokens(batch: int, length: int, vocab: int, lengths: list[int] | None = None) -> Tensor:
    """Random ids in [3, vocab) (no PAD/BOS/EOS), right-padded to ``lengths`` if given."""
    out = torch.randint(3, vocab, (batch, length))
    for row, n in enumerate(lengths or []):
        out[row, n:] = PAD
    return out


# ---------------------------------------------------------------------------- config


def test_config_presets_and_validation() -> None:
    base = TransformerConfig.base()
    assert (base.d_model, base.num_heads, base.num_encoder_layers, base.d_ff, base.dropout) == (
        512, 8, 6, 2048, 0.1)  # fmt: skip
    assert not base.norm_first and not base.use_final_norm  # the paper: Post-LN
    tiny = TransformerConfig.tiny(norm_first=True, src_vocab=40)
    assert tiny.d_model == 32 and tiny.src_vocab == 40 and tiny.use_final_norm
    with pytest.raises(ValueError, match="d_model=30 must be divisible by num_heads=4"):
        TransformerConfig.tiny(d_model=30)
    with pytest.raises(ValueError, match="activation must be one of"):
        TransformerConfig(activation="elu")
    with pytest.raises(ValueError, match="tgt_vocab must be >= 1"):
        TransformerConfig(tgt_vocab=0)
    big = TransformerConfig.big()
    assert (big.d_model, big.num_heads, big.d_ff, big.dropout, big.num_decoder_layers) == (1024, 16, 4096, 0.3, 6)
    assert TransformerConfig.big(dropout=0.1).dropout == 0.1
    tiny = TransformerConfig.tiny()
    assert (tiny.d_model, tiny.num_heads, tiny.num_encoder_layers, tiny.num_decoder_layers, tiny.d_ff) == (32, 4, 2, 2, 64)
    assert (tiny.src_vocab, tiny.tgt_vocab, tiny.dropout, tiny.max_len, tiny.pad_id) == (16, 16, 0.0, 64, 0)
    assert isinstance(tiny, BlockConfig)  # 0.2: the blocks are built from the same config


@pytest.mark.parametrize(
    ("overrides", "exc", "match"),
    [
        ({"num_encoder_layers": 0}, ValueError, r"num_encoder_layers must be >= 1, got 0"),
        ({"num_decoder_layers": 0}, ValueError, r"num_decoder_layers must be >= 1, got 0"),
        ({"num_decoder_layers": 2.0}, TypeError, r"num_decoder_layers must be an int, got float"),
        ({"src_vocab": 0}, ValueError, r"src_vocab must be >= 1, got 0"),
        ({"max_len": 0}, ValueError, r"max_len must be >= 1, got 0"),
        ({"dropout": 1.0}, ValueError, r"dropout must be a float in \[0, 1\), got 1.0"),
        ({"dropout": -0.5}, ValueError, r"dropout must be a float in \[0, 1\), got -0.5"),
        ({"d_model": 15, "num_heads": 3}, ValueError, r"d_model must be even .* got 15"),
        ({"pad_id": 11}, ValueError, r"pad_id must lie in \[0, 11\) or be None, got 11"),
        ({"pad_id": -1}, ValueError, r"pad_id must lie in \[0, 11\) or be None, got -1"),
        ({"share_embeddings": True}, ValueError, r"share_embeddings needs src_vocab == tgt_vocab, got 11 and 13"),
        ({"num_heads": 4}, ValueError, r"d_model=30 must be divisible by num_heads=4"),
        ({"layer_norm_eps": -1.0}, ValueError, r"layer_norm_eps must be > 0"),
    ],
)
def test_config_validates_its_fields(overrides: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        TransformerConfig.tiny(**{"src_vocab": 11, "tgt_vocab": 13, "d_model": 30, "num_heads": 5, **overrides})
    TransformerConfig.tiny(src_vocab=11, tgt_vocab=13, d_model=30, num_heads=5, pad_id=None)  # no padding: fine


def test_final_norm_and_tied_embeddings() -> None:
    assert isinstance(make_model().encoder.norm, nn.Identity)
    assert isinstance(make_model(norm_first=True).decoder.norm, nn.LayerNorm)
    assert isinstance(make_model(final_norm=True).encoder.norm, nn.LayerNorm)
    tied = make_model(tie_embeddings=True)
    assert tied.lm_head.weight is tied.tgt_embed.weight
    assert "positional.pe" not in tied.state_dict()  # the table is a non-persistent buffer
    pickle.dumps(tied)  # no lambdas on modules
    assert make_model().lm_head.weight is not make_model().tgt_embed.weight
    shared = Transformer(TransformerConfig.tiny(src_vocab=13, tgt_vocab=13, share_embeddings=True, tie_embeddings=True))
    assert shared.src_embed is shared.tgt_embed and shared.lm_head.weight is shared.src_embed.weight
    assert make_model().src_embed is not make_model().tgt_embed


def test_lm_head_bias_follows_config_bias() -> None:
    assert make_model().lm_head.bias is not None and make_model().lm_head.bias.shape == (13,)
    no_bias = make_model(bias=False)
    assert no_bias.lm_head.bias is None
    assert all(not name.endswith("bias") for name, _ in no_bias.named_parameters())
    src, tgt = tokens(2, 7, 11), tokens(2, 6, 13)
    assert no_bias(src, tgt).shape == (2, 6, 13)


def test_token_embeddings_are_initialised_with_std_inverse_sqrt_d_model() -> None:
    model = Transformer(TransformerConfig.tiny(src_vocab=3000, tgt_vocab=2000, d_model=64, num_heads=4))
    for embedding in (model.src_embed, model.tgt_embed):
        std = embedding.weight.std().item()
        assert abs(std - 64**-0.5) < 0.02 * 64**-0.5, std
        assert abs(embedding.weight.mean().item()) < 0.005
    # after the sqrt(d_model) scaling the embeddings have unit scale, like the positions
    assert abs((model.src_embed.weight * 8).std().item() - 1.0) < 0.02


# ---------------------------------------------------------------------------- forward


def test_forward_shapes_and_embedding_scale() -> None:
    model = make_model()
    src, tgt = tokens(2, 7, 11, [7, 4]), tokens(2, 6, 13)
    logits = model(src, tgt)
    assert logits.shape == (2, 6, 13)
    # the encoder's input is sqrt(d_model) * embedding + PE
    x = model.src_embed(src) * math.sqrt(30) + model.positional.pe[:7]
    close(model.encode(src), model.encoder(x, mask=masks.padding_mask_from_tokens(src, PAD)))


@pytest.mark.filterwarnings(NESTED_WARNING)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("norm_first", "activation"), [(False, "relu"), (True, "gelu")])
def test_stacks_match_nn_transformer(norm_first: bool, activation: str, dtype: torch.dtype) -> None:
    ref = nn.Transformer(30, 5, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=44,
                         activation=activation, norm_first=norm_first, batch_first=True,
                         layer_norm_eps=0.1)  # every LayerNorm, the final ones too, must read it
    with torch.no_grad():  # PyTorch initialises biases to 0: make every copy visible
        for name, p in ref.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.5)
    ref = ref.to(dtype).eval()
    ours = Transformer.from_torch(ref, src_vocab=11, tgt_vocab=13, pad_id=PAD).eval()
    assert len(ours.decoder.layers) == 3 and isinstance(ours.encoder.norm, nn.LayerNorm)
    x, y = torch.randn(2, 7, 30, dtype=dtype), torch.randn(2, 6, 30, dtype=dtype)
    src_kpm = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])  # PyTorch: True = ignore
    expected = ref(x, y, tgt_mask=~masks.causal_mask(6), src_key_padding_mask=src_kpm,
                   memory_key_padding_mask=src_kpm)  # fmt: skip
    src_mask = masks.from_key_padding_mask(src_kpm)  # (B, 1, 1, S), True = attend
    memory = ours.encoder(x, mask=src_mask)
    close(ours.decoder(y, memory, self_mask=masks.causal_mask(6), memory_mask=src_mask), expected)
    close(memory[0], ref.encoder(x, src_key_padding_mask=src_kpm)[0])


@pytest.mark.filterwarnings(NESTED_WARNING)
def test_stack_from_torch_without_final_norm() -> None:
    layer = nn.TransformerEncoderLayer(30, 5, 44, batch_first=True)
    ref = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    ours = Encoder.from_torch(ref).eval()
    assert isinstance(ours.norm, nn.Identity)
    x = torch.randn(3, 7, 30)
    close(ours(x), ref(x))
    dec_ref = nn.TransformerDecoder(nn.TransformerDecoderLayer(30, 5, 44, batch_first=True), 2).eval()
    dec = Decoder.from_torch(dec_ref).eval()
    y = torch.randn(3, 4, 30)
    close(dec(y, x, self_mask=masks.causal_mask(4)), dec_ref(y, x, tgt_mask=~masks.causal_mask(4)))



@pytest.mark.filterwarnings(NESTED_WARNING)
@pytest.mark.parametrize("training", [False, True])
def test_from_torch_keeps_the_training_mode(training: bool) -> None:
    # issue 25: an eval-mode model with dropout used to give a train-mode copy
    torch.manual_seed(0)
    ref = nn.Transformer(30, 5, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=44,
                         dropout=0.3, batch_first=True).train(training)  # fmt: skip
    ours = Transformer.from_torch(ref, src_vocab=11, tgt_vocab=13, pad_id=PAD)
    encoder, decoder = Encoder.from_torch(ref.encoder), Decoder.from_torch(ref.decoder)
    for module in (ours, encoder, decoder):
        assert all(m.training is training for m in module.modules())
    x, y = torch.randn(2, 7, 30), torch.randn(2, 6, 30)
    if training:  # dropout on: two calls differ
        assert not torch.allclose(ours.encoder(x), ours.encoder(x))
        assert not torch.allclose(decoder(y, x), decoder(y, x))
    else:
        expected = ref(x, y, tgt_mask=~masks.causal_mask(6))
        close(ours.decoder(y, ours.encoder(x), self_mask=masks.causal_mask(6)), expected)
        close(decoder(y, encoder(x), self_mask=masks.causal_mask(6)), expected)


@pytest.mark.filterwarnings(NESTED_WARNING)
def test_from_torch_refuses_sequence_first_models() -> None:
    # issue 25: the error names the layout, the layer and what to do
    with pytest.raises(ValueError, match=r"model.encoder.layers\[0\].self_attn has batch_first=False.*transpose"):
        Transformer.from_torch(nn.Transformer(30, 5, 1, 1, 44), src_vocab=11, tgt_vocab=13)
    stack = nn.TransformerEncoder(nn.TransformerEncoderLayer(30, 5, 44), 2, enable_nested_tensor=False)
    with pytest.raises(ValueError, match=r"stack.layers\[0\].self_attn has batch_first=False.*\(T, B, E\)"):
        Encoder.from_torch(stack)
    with pytest.raises(ValueError, match=r"stack.layers\[0\].self_attn has batch_first=False.*batch_first=True"):
        Decoder.from_torch(nn.TransformerDecoder(nn.TransformerDecoderLayer(30, 5, 44), 1))

def test_decoder_is_causal() -> None:
    model = make_model()
    src, tgt = tokens(2, 7, 11), tokens(2, 6, 13)
    logits = model(src, tgt)
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 3) % 10 + 3  # another real token at position 4
    logits2 = model(src, changed)
    close(logits2[:, :4], logits[:, :4])
    assert not torch.allclose(logits2[:, 4:], logits[:, 4:])


def test_encoder_padding_invariance() -> None:
    model = make_model()
    src, tgt = tokens(1, 5, 11), tokens(1, 6, 13)
    padded = torch.cat([src, torch.full((1, 3), PAD)], dim=1)  # (1, 8)
    close(model.encode(padded)[:, :5], model.encode(src))
    close(model(padded, tgt), model(src, tgt))
    # a source that is all padding and a target starting with padding: zeros, never NaN,
    # in a batch next to a real sequence and in a batch of its own
    empty_src, padded_tgt = torch.full((1, 4), PAD), torch.cat([torch.full((1, 1), PAD), tgt], 1)
    model.train()
    mixed = (torch.cat([empty_src, tokens(1, 4, 11)]), torch.cat([padded_tgt, tokens(1, 7, 13)]))
    for batch_src, batch_tgt in (mixed, (empty_src, padded_tgt)):
        model.zero_grad()
        logits = model(batch_src, batch_tgt)
        logits.sum().backward()
        assert torch.isfinite(logits).all()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


# ---------------------------------------------------------------------------- cached decoding


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_step_logits_equal_full_recomputation(norm_first: bool) -> None:
    model = make_model(norm_first=norm_first).double()
    src, tgt = tokens(2, 7, 11, [7, 5]), tokens(2, 6, 13)
    memory, memory_mask = model.encode(src), model.src_mask(src)
    full = model.decode(tgt, memory, memory_mask=memory_mask)  # (B, T, V)
    cache = model.new_cache()
    for t in range(6):
        step = model.decode(tgt[:, t : t + 1], memory, memory_mask=memory_mask, cache=cache)  # (B, 1, V)
        close(step[:, 0], full[:, t])
    # two new tokens at once after a cached prefix of four
    cache = model.new_cache()
    model.decode(tgt[:, :4], memory, memory_mask=memory_mask, cache=cache)
    close(model.decode(tgt[:, 4:], memory, memory_mask=memory_mask, cache=cache), full[:, 4:])


def test_decoding_step_t_uses_position_t() -> None:
    """The classic bug: every cached step encoded as position 0."""
    model = make_model().double()
    src, tgt = tokens(1, 7, 11), tokens(1, 5, 13)
    memory = model.encode(src)
    offsets: list[int] = []

    def record(module: nn.Module, args: tuple, kwargs: dict) -> None:
        offsets.append(kwargs["offset"])

    model.positional.register_forward_pre_hook(record, with_kwargs=True)
    cache = model.new_cache()
    for t in range(5):
        model.decode(tgt[:, t : t + 1], memory, cache=cache)
    assert offsets == [0, 1, 2, 3, 4]
    # forcing position 0 at step 3 gives different logits from the true ones
    full = model.decode(tgt[:, :4], memory)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, cache=cache)
    wrong = model.decode(tgt[:, 3:4], memory, cache=cache, offset=0)
    assert not torch.allclose(wrong[:, 0], full[:, 3], atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_cached_equals_uncached(norm_first: bool) -> None:
    model = make_model(norm_first=norm_first)
    src = tokens(3, 7, 11, [7, 5, 2])
    cached = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=12)
    full = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=12, use_cache=False)
    assert torch.equal(cached, full)
    assert cached.shape[0] == 3 and cached.shape[1] <= 12
    assert torch.all(cached[:, 0] == BOS)
    for row in cached.tolist():  # PAD only after EOS (a row that stops early is padded)
        end = row.index(EOS) + 1 if EOS in row else len(row)
        assert PAD not in row[:end] and set(row[end:]) <= {PAD}


def test_greedy_padded_batch_equals_each_source_alone() -> None:
    """Padding changes nothing: each padded source decodes exactly as it does alone, and a row
    that has emitted EOS is padded while the others go on."""
    model = make_model()
    with torch.no_grad():
        model.lm_head.bias[EOS] += 1.0  # the rows finish at different steps
    lengths = [7, 5, 3, 6]
    src = tokens(4, 7, 11, lengths)
    for use_cache in (True, False):
        batched = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=12, use_cache=use_cache)
        ends = set()
        for row, n in enumerate(lengths):
            alone = greedy_decode(model, src[row : row + 1, :n], bos_id=BOS, eos_id=EOS, max_len=12)[0]
            assert alone[-1] == EOS  # it finished...
            assert batched[row, : len(alone)].tolist() == alone.tolist()  # ...the same way
            assert torch.all(batched[row, len(alone) :] == PAD)  # and was padded afterwards
            ends.add(len(alone))
        assert len(ends) > 1 and batched.shape[1] == max(ends)


def test_greedy_stops_and_pads_after_eos() -> None:
    model = make_model()
    with torch.no_grad():  # make EOS the favourite after any token but 5
        model.lm_head.bias.zero_()
        model.lm_head.weight.zero_()
        model.lm_head.bias[EOS] = 1.0
        model.lm_head.bias[7] = 2.0
        model.tgt_embed.weight[7] = 0.0  # after 7 the logits are the bias: 7 again
    out = greedy_decode(model, tokens(2, 7, 11), bos_id=BOS, eos_id=EOS, max_len=6)
    assert out.tolist() == [[BOS, 7, 7, 7, 7, 7]] * 2  # runs to max_len
    with torch.no_grad():
        model.lm_head.bias[EOS] = 3.0
    out = greedy_decode(model, tokens(2, 7, 11), bos_id=BOS, eos_id=EOS, max_len=6)
    assert out.tolist() == [[BOS, EOS]] * 2  # stops as soon as every row has finished


def test_decoding_without_pad_id_fills_with_eos() -> None:
    model = make_model(pad_id=None)
    with torch.no_grad():
        model.lm_head.bias[EOS] = 50.0  # EOS always wins
    src = tokens(2, 7, 11)
    assert greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=8).tolist() == [[BOS, EOS]] * 2
    beams = beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=8, beam_size=3)
    assert beams.shape[1] < 8  # stopped once every beam had finished
    assert beams[:, :2].tolist() == [[BOS, EOS]] * 2 and torch.all(beams[:, 2:] == EOS)


def test_forward_mask_overrides() -> None:
    model = make_model()
    src, tgt = tokens(2, 7, 11), tokens(2, 6, 13)
    leaky = model(src, tgt, tgt_mask=torch.ones(6, 6, dtype=torch.bool))  # no causal mask
    changed = tgt.clone()
    changed[:, 5] = (changed[:, 5] + 1 - 3) % 10 + 3
    leaky2 = model(src, changed, tgt_mask=torch.ones(6, 6, dtype=torch.bool))
    assert not torch.allclose(leaky[:, 0], leaky2[:, 0])  # position 0 saw the last token
    only_first = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    only_first[..., 0] = True
    close(model(src, tgt, src_mask=only_first), model(src[:, :1], tgt))


# ---------------------------------------------------------------------------- beam search


def test_beam_size_one_is_greedy_and_cache_does_not_matter() -> None:
    model = make_model()
    src = tokens(3, 7, 11, [7, 6, 3])
    greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=10)
    assert torch.equal(beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=1), greedy)
    beams = beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=3)
    assert torch.equal(beams, beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=3, use_cache=False))
    for row in range(3):  # batched search == one source at a time
        single = beam_search(model, src[row : row + 1], bos_id=BOS, eos_id=EOS, max_len=10, beam_size=3)
        assert torch.equal(single[0], beams[row, : single.shape[1]])


def _sequence_score(model: Transformer, src: Tensor, seq: list[int], alpha: float) -> float:
    """log p(seq | src) (pad forbidden, as in decoding) / GNMT length penalty."""
    tgt = torch.tensor([[BOS, *seq]])
    logits = model(src, tgt)[0, :-1].double()  # (len, V)
    logits[:, PAD] = float("-inf")
    log_p = logits.log_softmax(dim=-1).gather(1, torch.tensor(seq)[:, None]).sum()
    return float(log_p) / ((5 + len(seq)) / 6) ** alpha


@pytest.mark.parametrize(("eos_bias", "penalty_decides"), [(1.0, False), (-1.0, True)])
def test_wide_beam_finds_the_exhaustive_optimum(eos_bias: float, penalty_decides: bool) -> None:
    """With more beams than hypotheses, beam search is exhaustive search. With EOS favoured the
    optimum is [EOS] (length 1, where the penalty is 1 for every alpha); with EOS disfavoured it
    is four tokens long, and the penalty's sign decides it."""
    model = Transformer(TransformerConfig.tiny(src_vocab=9, tgt_vocab=5, d_model=12, num_heads=3,
                                               d_ff=20, num_encoder_layers=1,
                                               num_decoder_layers=1)).eval()  # fmt: skip
    with torch.no_grad():
        model.lm_head.bias[EOS] = eos_bias  # how competitive early stops are
    src, alpha, max_len = tokens(1, 6, 9), 0.6, 5  # up to 4 generated tokens
    hypotheses = []
    for n in range(1, max_len):  # every sequence over {BOS, 3, 4} then EOS, or unfinished
        hypotheses += [[*p, EOS] for p in itertools.product([BOS, 3, 4], repeat=n - 1)]
    hypotheses += [list(p) for p in itertools.product([BOS, 3, 4], repeat=max_len - 1)]
    with torch.no_grad():
        best = max(hypotheses, key=lambda seq: _sequence_score(model, src, seq, alpha))
    found = beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=max_len, beam_size=128, length_penalty=alpha)[0]
    assert found.tolist()[: len(best) + 1] == [BOS, *best]
    if penalty_decides:  # with the penalty's sign flipped, the optimum would be another one
        with torch.no_grad():
            flipped = max(hypotheses, key=lambda seq: _sequence_score(model, src, seq, -alpha))
        assert len(best) == 4 and flipped != best



def test_length_penalty_by_hand() -> None:
    lengths = torch.tensor([1.0, 2.0, 4.0])
    torch.testing.assert_close(_length_penalty(lengths, 1.0), torch.tensor([1.0, 7 / 6, 9 / 6]))
    torch.testing.assert_close(_length_penalty(lengths, 0.6), torch.tensor([1.0, 1.0969, 1.2754]),
                               atol=1e-4, rtol=0)  # (7/6)^0.6, (9/6)^0.6  # fmt: skip
    torch.testing.assert_close(_length_penalty(lengths, 0.0), torch.ones(3))


def test_best_beams_counts_the_eos_in_the_length() -> None:
    """The final pick by hand. |Y| counts the generated tokens up to the first EOS, EOS
    included, as transformers' beam search does (it divides by ``(cur_len + 1 -
    decoder_prompt_len) ** length_penalty`` when a beam emits EOS); an unfinished beam counts
    all L - 1. mtlib then applies GNMT's penalty ((5 + |Y|) / 6) ** alpha, transformers |Y| **
    alpha. With the EOS left out, both sources below would pick their unfinished beam."""
    ys = torch.tensor([
        [BOS, 5, EOS, PAD, PAD],  # source 0: |Y| = 2
        [BOS, EOS, PAD, PAD, PAD],  # |Y| = 1
        [BOS, 5, 6, 7, 8],  # unfinished: |Y| = 4
        [BOS, 3, 4, 5, EOS],  # source 1 (padded with EOS, pad_id None): |Y| = 4
        [BOS, 3, EOS, EOS, EOS],  # |Y| = 2, the first EOS
        [BOS, 3, 4, 5, 6],  # unfinished: |Y| = 4
    ])  # fmt: skip
    scores = torch.tensor([[-1.5, -1.0, -1.65], [-2.0, -1.7, -2.1]])  # sums of log-probabilities
    # alpha = 1, penalties (5 + |Y|) / 6:
    #   source 0: -1.5 / (7/6) = -1.286, -1.0 / 1 = -1.0 (best), -1.65 / (9/6) = -1.1
    #   source 1: -2.0 / (9/6) = -1.333 (best), -1.7 / (7/6) = -1.457, -2.1 / (9/6) = -1.4
    # without the EOS: source 0: -1.5, -1.2, -1.1 (the unfinished one); source 1: -1.5, -1.7, -1.4
    best = _best_beams(ys, scores, EOS, alpha=1.0)
    assert torch.equal(best, ys[[1, 3]])
    # alpha = 0: the raw sums decide, -1.0 and -1.7
    assert torch.equal(_best_beams(ys, scores, EOS, alpha=0.0), ys[[1, 4]])

# ---------------------------------------------------------------------------- bad input


def test_transformer_rejects_bad_input() -> None:
    model = make_model()
    src, tgt = tokens(2, 7, 11), tokens(2, 6, 13)
    with pytest.raises(TypeError, match=r"src must hold integer token ids .*float32"):
        model(src.float(), tgt)
    with pytest.raises(TypeError, match="tgt must be a Tensor of token ids"):
        model(src, tgt.tolist())
    with pytest.raises(ValueError, match=r"src must have shape \(batch, seq_len >= 1\), got \(7,\)"):
        model.encode(src[0])
    with pytest.raises(ValueError, match=r"tgt ids must lie in \[0, 13\)"):
        model(src, torch.full((2, 6), 13))
    with pytest.raises(ValueError, match=r"sequence length 65.*max_len=64"):
        model(src, tokens(2, 65, 13))
    with pytest.raises(ValueError, match=r"max_len must be an int in \[1, config.max_len=64\], got 65"):
        greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=65)
    with pytest.raises(ValueError, match=r"max_len must be an int in \[1, config.max_len=64\], got 0"):
        beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=0)
    with pytest.raises(ValueError, match="beam_size must be >= 1"):
        beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=5, beam_size=0)
    for decode in (greedy_decode, beam_search):
        with pytest.raises(ValueError, match=r"bos_id must be an int in \[0, tgt_vocab=13\), got 13"):
            decode(model, src, bos_id=13, eos_id=EOS, max_len=5)
        with pytest.raises(ValueError, match=r"eos_id must be an int in \[0, tgt_vocab=13\), got -1"):
            decode(model, src, bos_id=BOS, eos_id=-1, max_len=5)
        with pytest.raises(ValueError, match=r"eos_id must be an int in \[0, tgt_vocab=13\), got 2.0"):
            decode(model, src, bos_id=BOS, eos_id=2.0, max_len=5)
        with pytest.raises(ValueError, match=r"bos_id must be an int .*got True"):
            decode(model, src, bos_id=True, eos_id=EOS, max_len=5)
        with pytest.raises(TypeError, match=r"positional argument"):  # ids are keyword-only
            decode(model, src, BOS, EOS, max_len=5)
        with pytest.raises(ValueError, match=r"src ids must lie in \[0, 11\)"):
            decode(model, torch.full((2, 7), 11), bos_id=BOS, eos_id=EOS, max_len=5)
    with pytest.raises(ValueError, match="one DecoderCache per layer"):
        model.decode(tgt, model.encode(src), cache=[DecoderCache()])
    with pytest.raises(ValueError, match=r"memory must have shape \(batch=2, src_len, d_model=30\) like x, got \(3, 7, 30\)"):
        model.decode(tgt, model.encode(tokens(3, 7, 11)))
    with pytest.raises(TypeError, match="nn.Transformer"):
        Transformer.from_torch(nn.Linear(2, 2), src_vocab=3, tgt_vocab=3)
    # 0.2: masks are bool and keyword-only
    with pytest.raises(TypeError, match=r"mask must be a bool Tensor.*bias="):
        model(src, tgt, tgt_mask=torch.ones(6, 6))
    with pytest.raises(TypeError, match=r"positional argument"):
        model(src, tgt, None, torch.ones(6, 6, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"positional argument"):
        model.decode(tgt, model.encode(src), model.src_mask(src))
    with pytest.raises(ValueError, match=r"True means MAY attend"):
        model(src, tgt, tgt_mask=~masks.causal_mask(6))


@pytest.mark.filterwarnings(NESTED_WARNING)
def test_from_torch_overrides_only_free_fields() -> None:
    ref = nn.Transformer(30, 5, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=44, batch_first=True)
    assert set(Transformer.FREE_FIELDS) == {"max_len", "pad_id", "tie_embeddings", "share_embeddings"}
    ours = Transformer.from_torch(ref, src_vocab=13, tgt_vocab=13, max_len=20, pad_id=None, tie_embeddings=True,
                                  share_embeddings=True)  # fmt: skip
    c = ours.config
    assert (c.max_len, c.pad_id, c.tie_embeddings, c.share_embeddings) == (20, None, True, True)
    assert (c.d_model, c.num_heads, c.d_ff, c.num_encoder_layers, c.num_decoder_layers) == (30, 5, 44, 1, 2)
    assert c.use_final_norm and ours.src_embed is ours.tgt_embed
    for field, value in (("d_model", 40), ("dropout", 0.0), ("num_decoder_layers", 3), ("norm_first", True)):
        with pytest.raises(ValueError, match=rf"\['{field}'\] are fixed by the PyTorch model; overrides may set only"):
            Transformer.from_torch(ref, src_vocab=13, tgt_vocab=13, **{field: value})
    with pytest.raises(TypeError, match=r"positional argument"):  # vocabularies are keyword-only
        Transformer.from_torch(ref, 13, 13)


# ---------------------------------------------------------------------------- misuse traps


def test_forward_memory_mask_is_separate_from_the_encoder_mask() -> None:
    """A (B, 1, S, S) encoder mask is never silently reused as cross-attention's mask."""
    model = make_model()
    src, tgt = tokens(3, 7, 11, lengths=[7, 5, 3]), tokens(3, 6, 13)  # S = 7 != T = 6
    offsets = torch.arange(7)[:, None] - torch.arange(7)[None, :]  # (S, S): i - j
    band = offsets.abs() <= 2  # (S, S): each source position sees its neighbours within 2
    encoder_mask = band[None, None] & model.src_mask(src)  # (B, 1, S, S): a banded encoder
    with pytest.raises(ValueError, match=r"src_mask has shape \(3, 1, 7, 7\).*pass memory_mask="):
        model(src, tgt, src_mask=encoder_mask)
    square = tokens(3, 7, 13)  # T = S: the trap used to run silently
    with pytest.raises(ValueError, match="memory_mask"):
        model(src, square, src_mask=encoder_mask)
    got = model(src, tgt, src_mask=encoder_mask, memory_mask=model.src_mask(src))
    memory = model.encode(src, src_mask=encoder_mask)  # (B, S, d_model)
    close(got, model.decode(tgt, memory, memory_mask=model.src_mask(src)))
    assert not torch.allclose(got, model(src, tgt), atol=1e-4)  # the band changed the encoder
    only_first = torch.zeros(3, 1, 6, 7, dtype=torch.bool)  # a (B, 1, T, S) cross-attention mask
    only_first[..., 0] = True
    with torch.no_grad():
        expected = model.decode(tgt, model.encode(src), memory_mask=only_first)  # padding-masked encoder
    close(model(src, tgt, memory_mask=only_first), expected)


def test_reused_decoder_cache_refuses_a_new_source() -> None:
    model = make_model()
    first, second = tokens(2, 7, 11), tokens(2, 7, 11)  # same shape, other sources
    tgt = torch.full((2, 1), BOS)
    cache = model.new_cache()
    model.decode(tgt, model.encode(first), cache=cache)
    for layer_cache in cache:
        layer_cache.self_attn.reset()  # resetting only the self-attention part is the trap
    with pytest.raises(ValueError, match=r"static\) cache was filled from .*call cache.reset\(\)"):
        model.decode(tgt, model.encode(second), cache=cache)
    for layer_cache in cache:
        layer_cache.reset()
    memory = model.encode(second)
    close(model.decode(tgt, memory, cache=cache), model.decode(tgt, memory))


def test_decoding_in_training_mode_with_dropout_warns() -> None:
    model = make_model(dropout=0.1).train()
    src = tokens(2, 7, 11)
    for decode in (greedy_decode, beam_search):
        with pytest.warns(UserWarning, match=rf"{decode.__name__}: the model is in training mode"):
            decode(model, src, bos_id=BOS, eos_id=EOS, max_len=5)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        greedy_decode(model.eval(), src, bos_id=BOS, eos_id=EOS, max_len=5)  # eval: no warning
        greedy_decode(make_model().train(), src, bos_id=BOS, eos_id=EOS, max_len=5)  # no dropout
