"""Tests of mtlib.models.bart: parity with Hugging Face's BART, generation, loading errors, inputs.

Reference models are random-init ``transformers`` BARTs built from small configs (no download)
with odd sizes: vocabulary 97, d_model 36, 2 encoder layers with 3 heads and d_ff 52, 3 decoder
layers with 4 heads and d_ff 44, 40 positions; batch 3 with padding in the encoder input
(15 tokens; rows of 15, 10 and 4) and 9 decoder tokens.
"""

from __future__ import annotations

import logging
import re

import pytest
import torch

from mtlib.blocks import DecoderCache
from mtlib.models.bart import BART, BARTConfig, shift_tokens_right

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)

V, D, P = 97, 36, 40
B, T_ENC, T_DEC = 3, 15, 9
PAD, START = 1, 2


def hf_config(**overrides: object) -> object:
    fields = dict(vocab_size=V, d_model=D, encoder_layers=2, decoder_layers=3,
                  encoder_attention_heads=3, decoder_attention_heads=4, encoder_ffn_dim=52,
                  decoder_ffn_dim=44, max_position_embeddings=P)  # fmt: skip
    fields.update(overrides)
    return transformers.BartConfig(**fields)


def make_pair(seed: int = 0, **overrides: object) -> tuple[torch.nn.Module, BART]:
    """A random HF BART with weights larger than its init (std 0.02), so that every part,
    LayerNorm gains and biases included, moves the logits; and our copy."""
    torch.manual_seed(seed)
    hf = transformers.BartForConditionalGeneration(hf_config(**overrides)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.25)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.25)
            else:
                p.normal_(0.0, 0.3 if "embed" in name or "shared" in name else 0.6)
        hf.final_logits_bias.normal_(0.0, 0.1)
    return hf, BART.from_hf(hf)


@pytest.fixture(scope="module")
def pair() -> tuple[torch.nn.Module, BART]:
    return make_pair()


def batch(seed: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Encoder ids (3, 15) padded with id 1 (rows of 15, 10 and 4 tokens), mask, decoder ids."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(3, V, (B, T_ENC), generator=gen)
    mask = torch.ones(B, T_ENC, dtype=torch.long)
    mask[1, 10:] = 0
    mask[2, 4:] = 0
    y = torch.randint(3, V, (B, T_DEC), generator=gen)
    return x.masked_fill(mask == 0, PAD), mask, y


# --------------------------------------------------------------------------------------------
# Loading and parity
# --------------------------------------------------------------------------------------------


def test_config_from_hf(pair: tuple[torch.nn.Module, BART]) -> None:
    _, bart = pair
    c = bart.config
    assert (c.vocab_size, c.d_model, c.max_position_embeddings) == (V, D, P)
    assert (c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim) == (2, 3, 52)
    assert (c.decoder_layers, c.decoder_attention_heads, c.decoder_ffn_dim) == (3, 4, 44)
    assert (c.pad_token_id, c.bos_token_id, c.eos_token_id, c.decoder_start_token_id) == (
        1,
        0,
        2,
        2,
    )
    assert c.activation_function == "gelu" and not c.scale_embedding
    assert bart.lm_head.weight is bart.shared.weight  # tied
    assert bart.encoder.embed_positions.weight.shape == (P + 2, D)  # the offset of 2
    assert bart.decoder.layers[0].self_attn.num_heads == 4
    assert not bart.decoder.layers[0].norm_first  # post-norm
    assert not bart.training


@pytest.mark.parametrize("scale_embedding", [False, True])
def test_logits_equal_hf_with_padding(scale_embedding: bool) -> None:
    hf, bart = make_pair(seed=1, scale_embedding=scale_embedding)
    assert bart.embed_scale == (D**0.5 if scale_embedding else 1.0)
    x, mask, y = batch()
    with torch.no_grad():
        expected = hf(input_ids=x, attention_mask=mask, decoder_input_ids=y).logits
        got = bart(x, y, mask)
    assert got.shape == (B, T_DEC, V)
    assert expected.std() > 0.5  # not a trivially small output
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_padding_and_offset_matter(pair: tuple[torch.nn.Module, BART]) -> None:
    _, bart = pair
    x, mask, y = batch()
    with torch.no_grad():
        masked = bart(x, y, mask)
        noisy = bart(x.masked_fill(mask == 0, 7), y, mask)  # other ids at the padded places
        unmasked = bart(x, y)
        assert (masked[1:] - unmasked[1:]).abs().max() > 1e-2
        torch.testing.assert_close(noisy, masked, atol=1e-5, rtol=0)
        table = bart.decoder.embed_positions.weight
        saved = table[:2].clone()
        table[:2] = 0.0  # rows 0 and 1 are never read: position 0 is row 2
        try:
            torch.testing.assert_close(bart(x, y, mask), masked, atol=0, rtol=0)
        finally:
            table[:2] = saved


def test_loss_and_shift_equal_hf(pair: tuple[torch.nn.Module, BART]) -> None:
    hf, bart = pair
    x, mask, labels = batch(seed=6)
    labels[0, 5:] = -100
    shifted = shift_tokens_right(labels, PAD, START)
    hf_shift = transformers.models.bart.modeling_bart.shift_tokens_right
    assert torch.equal(shifted, hf_shift(labels, PAD, START))
    assert shifted[:, 0].tolist() == [START] * B and (shifted[0, 6:] == PAD).all()
    with torch.no_grad():
        expected = hf(input_ids=x, attention_mask=mask, labels=labels).loss
        logits = bart(x, shifted, mask)
    got = torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_parameter_counts(pair: tuple[torch.nn.Module, BART]) -> None:
    hf, bart = pair
    assert bart.num_parameters() == sum(p.numel() for p in hf.parameters()) == 67_628
    with torch.device("meta"):  # shapes only: no 560 MB of float32
        ours = BART(BARTConfig.base())
        base = transformers.BartForConditionalGeneration(
            transformers.BartConfig(
                vocab_size=50265,
                d_model=768,
                encoder_layers=6,
                decoder_layers=6,
                encoder_attention_heads=12,
                decoder_attention_heads=12,
                encoder_ffn_dim=3072,
                decoder_ffn_dim=3072,
                max_position_embeddings=1024,
            )  # fmt: skip
        )
    assert ours.num_parameters() == sum(p.numel() for p in base.parameters()) == 139_420_416
    assert BART(BARTConfig.tiny()).num_parameters() == 192_512


# --------------------------------------------------------------------------------------------
# Load errors name the tensor
# --------------------------------------------------------------------------------------------


class _Wrapped(torch.nn.Module):
    """A BartForConditionalGeneration whose state_dict has been tampered with."""

    def __init__(self, hf: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = hf.config
        self._state = state

    def state_dict(self, *args: object, **kwargs: object) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return dict(self._state)


def test_missing_tensor_is_named(pair: tuple[torch.nn.Module, BART]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    del state["model.decoder.layers.2.encoder_attn.k_proj.bias"]
    with pytest.raises(ValueError, match=re.escape("decoder.layers.2.cross_attn.k_proj.bias")):
        BART.from_hf(_Wrapped(hf, state))
    state = dict(hf.state_dict())
    del state["final_logits_bias"]
    with pytest.raises(ValueError, match="final_logits_bias"):
        BART.from_hf(_Wrapped(hf, state))


def test_misshapen_and_unexpected_tensors_are_named(pair: tuple[torch.nn.Module, BART]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["model.decoder.layers.1.final_layer_norm.weight"] = torch.ones(D + 1)
    with pytest.raises(ValueError, match=r"shape mismatch copying decoder\.layers\.1\.final_layer_norm\.weight into decoder\.layers\.1\.norm3\.weight"):  # fmt: skip
        BART.from_hf(_Wrapped(hf, state))
    state = dict(hf.state_dict())
    state["model.encoder.layer_norm.weight"] = torch.ones(D)  # mBART's final norm
    with pytest.raises(ValueError, match=r"encoder\.layer_norm\.weight .* has no counterpart"):
        BART.from_hf(_Wrapped(hf, state))


def test_untied_head_and_unsupported_config_refused(pair: tuple[torch.nn.Module, BART]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(ValueError, match="lm_head.weight differs from shared.weight"):
        BART.from_hf(_Wrapped(hf, state))
    with pytest.raises(ValueError, match="activation_function"):
        BART.config_from_hf(hf_config(activation_function="silu"))
    with pytest.raises(ValueError, match="add_final_layer_norm"):
        BART.config_from_hf(hf_config(add_final_layer_norm=True))
    with pytest.raises(TypeError, match="BartForConditionalGeneration"):
        BART.from_hf(torch.nn.Linear(2, 3))


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


def hf_greedy(hf: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor, new: int) -> torch.Tensor:
    """Plain greedy search in transformers: one beam, and none of the generation config's
    extras that BART checkpoints set (forced <s> first, forced </s> at the length limit, no
    repeated n-grams, a minimum length), so that each step is an argmax."""
    return hf.generate(input_ids=x, attention_mask=mask, do_sample=False, num_beams=1,
                       max_new_tokens=new, min_length=0, forced_bos_token_id=None,
                       forced_eos_token_id=None, no_repeat_ngram_size=0)  # fmt: skip


def test_greedy_equals_hf_generate(pair: tuple[torch.nn.Module, BART]) -> None:
    hf, bart = pair
    x, mask, _ = batch()
    expected = hf_greedy(hf, x, mask, 12)
    for use_cache in (True, False):
        assert torch.equal(bart.generate(x, 12, mask, use_cache=use_cache), expected)
    assert expected.shape == (B, 13) and (expected[:, 0] == START).all()


def test_greedy_with_eos_pads_finished_rows_and_stops_early() -> None:
    """A random BART mostly repeats a token; make row 0's repeated token the end of sequence
    (in both models) to see padding after it, then end every row at once."""
    hf, bart = make_pair()
    x, mask, _ = batch()
    free = bart.generate(x, 12, mask)
    eos = int(free[0, 2])
    assert not (free[1:] == eos).any()  # the other rows go on
    hf.config.eos_token_id = hf.generation_config.eos_token_id = eos
    bart = BART.from_hf(hf)
    assert bart.config.eos_token_id == eos and bart.config.decoder_start_token_id == START
    expected = hf_greedy(hf, x, mask, 12)
    for use_cache in (True, False):
        got = bart.generate(x, 12, mask, use_cache=use_cache)
        assert torch.equal(got, expected)
    first_eos = int((got[0] == eos).nonzero()[0])
    assert got.shape == (B, 13) and (got[0, first_eos + 1 :] == PAD).all()
    ends = [int(free[i, 1]) for i in range(B)]  # each row's first token
    hf.config.eos_token_id = hf.generation_config.eos_token_id = ends[1]
    bart = BART.from_hf(hf)
    rows = [i for i in range(B) if ends[i] == ends[1]]
    got = bart.generate(x[rows], 12, mask[rows])
    assert got.shape == (len(rows), 2)  # all finished after one token: stopped
    assert torch.equal(got, hf_greedy(hf, x[rows], mask[rows], 12))


def test_cached_decode_equals_full_decode(pair: tuple[torch.nn.Module, BART]) -> None:
    _, bart = pair
    x, mask, y = batch(seed=7)
    with torch.no_grad():
        memory = bart.encode(x, mask)
        full = bart.decode(y, memory, mask)
        cache = bart.new_cache()
        first = bart.decode(y[:, :3], memory, mask, cache=cache)
        steps = [bart.decode(y[:, t : t + 1], memory, mask, cache=cache) for t in range(3, T_DEC)]
    assert cache[0].length == T_DEC and cache[2].cross_attn.length == T_ENC
    torch.testing.assert_close(torch.cat([first, *steps], dim=1), full, atol=1e-4, rtol=0)


def test_sampling_cached_equals_uncached_and_keeps_mode(pair: tuple[torch.nn.Module, BART]) -> None:
    _, bart = pair
    x, mask, _ = batch(seed=8)
    runs = [
        bart.generate(
            x,
            10,
            mask,
            do_sample=True,
            temperature=2.0,
            top_k=30,
            generator=torch.Generator().manual_seed(9),
            use_cache=c,
        )  # fmt: skip
        for c in (True, False)
    ]
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], bart.generate(x, 10, mask))
    bart.train()
    try:
        bart.generate(x, 2, mask)
        assert bart.training
    finally:
        bart.eval()


# --------------------------------------------------------------------------------------------
# Bad input and config validation
# --------------------------------------------------------------------------------------------


def test_bad_input(pair: tuple[torch.nn.Module, BART]) -> None:
    _, bart = pair
    x, mask, y = batch()
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(batch, T_enc\) = \(3, 15\)"):  # fmt: skip
        bart(x, y, mask.T)
    with pytest.raises(ValueError, match=r"attention_mask must hold only 1 \(token\) and 0 \(padding\)"):
        bart(x, y, mask * 2)
    with pytest.raises(ValueError, match=r"input_ids ids must lie in \[0, 97\)"):
        bart(x - 2, y, mask)
    with pytest.raises(ValueError, match=r"decoder_input_ids ids must lie in \[0, 97\)"):
        bart(x, y + V, mask)
    with pytest.raises(ValueError, match="input_ids has 41 tokens .* max_position_embeddings=40"):
        bart(torch.ones(1, P + 1, dtype=torch.long), y[:1])
    with pytest.raises(ValueError, match="decoder_input_ids must have batch size 3"):
        bart(x, y[:1], mask)
    memory = bart.encode(x, mask)
    with pytest.raises(ValueError, match=r"memory must have shape \(batch=3, T_enc, d_model=36\)"):
        bart.decode(y, memory[:2], mask)
    with pytest.raises(ValueError, match="one DecoderCache per decoder block"):
        bart.decode(y, memory, mask, cache=[DecoderCache()])
    with pytest.raises(ValueError, match="max_position_embeddings=40"):
        bart.generate(x, P, mask)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        bart.generate(x, 2.5, mask)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="labels must be an integer tensor"):
        shift_tokens_right(y.float(), PAD, START)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="divisible by decoder_attention_heads=5"):
        BARTConfig(d_model=36, encoder_attention_heads=3, decoder_attention_heads=5)
    with pytest.raises(ValueError, match="activation_function"):
        BARTConfig(activation_function="swiglu")
    with pytest.raises(ValueError, match="dropout"):
        BARTConfig(dropout=-0.1)
    with pytest.raises(ValueError, match="encoder_ffn_dim must be >= 1"):
        BARTConfig(encoder_ffn_dim=0)
    with pytest.raises(ValueError, match=r"pad_token_id must be an int in \[0, vocab_size=128\)"):
        BARTConfig.tiny(pad_token_id=-1)
    tiny = BARTConfig.tiny(vocab_size=300)
    assert (tiny.vocab_size, tiny.d_model, tiny.encoder_layers, tiny.decoder_attention_heads) == (
        300, 64, 2, 4,
    )  # fmt: skip
    base = BARTConfig.base()
    assert (base.d_model, base.encoder_layers, base.decoder_ffn_dim, base.vocab_size) == (
        768, 6, 3072, 50265,
    )  # fmt: skip


@pytest.mark.parametrize("pad_token_id", [1, 0, 96])
def test_init_leaves_padding_row_zero_like_hf(pad_token_id: int) -> None:
    # The head is tied to `shared`, and apply() initialises lm_head after shared: a normal_ on
    # the head re-filled the padding row that _init_weights had just zeroed (max |row| 0.041).
    torch.manual_seed(3)
    ours = BART(BARTConfig.tiny(vocab_size=V, pad_token_id=pad_token_id))
    assert ours.lm_head.weight is ours.shared.weight  # still one tied matrix
    assert torch.count_nonzero(ours.shared.weight[pad_token_id]) == 0
    others = ours.shared.weight[torch.arange(V) != pad_token_id]  # (V - 1, d_model)
    assert 0.015 < others.std().item() < 0.025  # the rest keeps BART's normal(0, 0.02)
    hf = transformers.BartForConditionalGeneration(hf_config(pad_token_id=pad_token_id))
    assert torch.count_nonzero(hf.model.shared.weight[pad_token_id]) == 0  # Hugging Face agrees
