"""Tests of mtlib.models.t5: parity with Hugging Face's T5, generation, loading errors, inputs.

Reference models are random-init ``transformers`` T5s built from small configs (no download)
with odd sizes: vocabulary 97, d_model 36 with 3 heads of d_kv 12, d_ff 52, 2 encoder and 3
decoder layers, 8 position buckets with max distance 12 (encoder inputs of 15 tokens reach the
logarithmic buckets and the last one); batch 3, with padding in the encoder input.
"""

from __future__ import annotations

import logging
import re

import pytest
import torch

from mtlib.blocks import DecoderCache
from mtlib.models.t5 import T5, RMSNorm, T5Config, t5_loss

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)

V, D, H, DKV, FF, L_ENC, L_DEC = 97, 36, 3, 12, 52, 2, 3
B, T_ENC, T_DEC = 3, 15, 9


def hf_config(**overrides: object) -> object:
    fields = dict(vocab_size=V, d_model=D, d_kv=DKV, d_ff=FF, num_layers=L_ENC,
                  num_decoder_layers=L_DEC, num_heads=H, relative_attention_num_buckets=8,
                  relative_attention_max_distance=12, decoder_start_token_id=0)  # fmt: skip
    fields.update(overrides)
    return transformers.T5Config(**fields)


def make_pair(seed: int = 0, **overrides: object) -> tuple[torch.nn.Module, T5]:
    """A random HF T5 (norm gains and position biases perturbed so they matter) and our copy."""
    torch.manual_seed(seed)
    hf = transformers.T5ForConditionalGeneration(hf_config(**overrides)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "layer_norm" in name:
                p.normal_(1.0, 0.25)  # gains that are not all 1
            elif "relative_attention_bias" in name:
                p.normal_(0.0, 1.0)  # biases large enough to change the attention
        if overrides.get("tie_word_embeddings") is False:
            # transformers 5 always ties the weights and only stops scaling the output; a T5
            # v1.1 checkpoint has a head of its own, so give it one
            hf.lm_head.weight = torch.nn.Parameter(torch.randn(V, D))
    return hf, T5.from_hf(hf)


@pytest.fixture(scope="module")
def pair() -> tuple[torch.nn.Module, T5]:
    return make_pair()


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Encoder ids (3, 15) with rows of 15, 10 and 4 real tokens, and decoder ids (3, 9)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(2, V, (B, T_ENC), generator=gen)
    mask = torch.ones(B, T_ENC, dtype=torch.long)
    mask[1, 10:] = 0
    mask[2, 4:] = 0
    x = x.masked_fill(mask == 0, 0)  # pad id 0
    y = torch.randint(2, V, (B, T_DEC), generator=gen)
    return x, mask, y


# --------------------------------------------------------------------------------------------
# Loading and parity
# --------------------------------------------------------------------------------------------


def test_config_from_hf(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    c = t5.config
    assert (c.vocab_size, c.d_model, c.num_heads, c.d_kv, c.d_ff) == (V, D, H, DKV, FF)
    assert (c.num_layers, c.decoder_layers, len(t5.decoder.blocks)) == (L_ENC, L_DEC, L_DEC)
    assert (c.relative_attention_num_buckets, c.relative_attention_max_distance) == (8, 12)
    assert c.tie_word_embeddings and t5.lm_head.weight is t5.shared.weight
    assert (c.pad_token_id, c.eos_token_id, c.decoder_start_token_id) == (0, 1, 0)
    assert c.dropout == pytest.approx(0.1) and c.layer_norm_eps == 1e-6
    assert not t5.training  # the HF model was in eval mode


@pytest.mark.parametrize(
    ("proj", "tied"), [("relu", True), ("relu", False), ("gated-gelu", True), ("gated-gelu", False)]
)
def test_logits_equal_hf_with_padding(proj: str, tied: bool) -> None:
    hf, t5 = make_pair(feed_forward_proj=proj, tie_word_embeddings=tied)
    assert t5.config.feed_forward_proj == proj and t5.config.tie_word_embeddings == tied
    assert (t5.lm_head.weight is t5.shared.weight) == tied
    x, mask, y = batch()
    with torch.no_grad():
        expected = hf(input_ids=x, attention_mask=mask, decoder_input_ids=y).logits
        got = t5(x, y, mask)
    assert got.shape == (B, T_DEC, V)
    assert expected.std() > 0.5  # not a trivially small output
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("proj", ["relu", "gated-gelu"])
def test_float16_overflow_clamped_like_hf(proj: str) -> None:
    """A residual stream beyond float16's range (65,504), as in t5-large and up: Hugging Face
    clamps it after every sub-layer, so the float16 logits stay finite; ours must be the same."""
    hf, _ = make_pair(feed_forward_proj=proj)
    with torch.no_grad():
        for block in (*hf.encoder.block, *hf.decoder.block):
            block.layer[-1].DenseReluDense.wo.weight.mul_(3e4)  # feed-forward outputs ~1e4-1e5
    x, mask, y = batch()
    with torch.no_grad():
        stream = hf.encoder(input_ids=x, attention_mask=mask, output_hidden_states=True)
        assert stream.hidden_states[-2].abs().max() > torch.finfo(torch.float16).max  # in float32
        hf = hf.half()
        t5 = T5.from_hf(hf)
        assert next(t5.parameters()).dtype == torch.float16
        expected = hf(input_ids=x, attention_mask=mask, decoder_input_ids=y).logits
        got = t5(x, y, mask)
    assert torch.isfinite(expected).all() and torch.isfinite(got).all()
    torch.testing.assert_close(got.float(), expected.float(), atol=0.05, rtol=0.01)


def test_padding_matters_and_padded_keys_are_ignored(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    x, mask, y = batch()
    with torch.no_grad():
        masked = t5(x, y, mask)
        unmasked = t5(x, y)  # the padding read as tokens
        noisy = t5(x.masked_fill(mask == 0, 5), y, mask)  # other ids at the padded places
    assert (masked[1:] - unmasked[1:]).abs().max() > 1e-2
    torch.testing.assert_close(masked[0], unmasked[0], atol=1e-5, rtol=0)  # row 0: no padding
    torch.testing.assert_close(noisy, masked, atol=1e-5, rtol=0)


def test_structure_names_t5s_choices(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    assert all(not name.endswith(".bias") for name, _ in t5.named_parameters())  # no biases
    norms = [m for m in t5.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms == [] and isinstance(t5.encoder.final_layer_norm, RMSNorm)
    biases = [n for n, _ in t5.named_parameters() if "relative_attention_bias" in n]
    assert biases == [  # one per stack, shared by its blocks
        "encoder.relative_bias.relative_attention_bias.weight",
        "decoder.relative_bias.relative_attention_bias.weight",
    ]
    assert t5.encoder.relative_bias.bidirectional and not t5.decoder.relative_bias.bidirectional
    assert t5.encoder.blocks[0].self_attn.scale == 1.0  # no 1/sqrt(d_kv)
    assert t5.encoder.blocks[0].cross_attn is None and t5.decoder.blocks[0].cross_attn is not None


def test_rms_norm_equals_torch_rms_norm() -> None:
    torch.manual_seed(3)
    ours, theirs = RMSNorm(D, eps=1e-6), torch.nn.RMSNorm(D, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_(1.0, 0.3)
        theirs.weight.copy_(ours.weight)
    x = torch.randn(2, 5, D) * 3
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=0)
    normed = RMSNorm(D)(x)  # unit gain: root mean square 1, mean not removed
    assert normed.pow(2).mean(-1).sub(1).abs().max() < 1e-4


def test_loss_equals_hf(pair: tuple[torch.nn.Module, T5]) -> None:
    hf, t5 = pair
    x, mask, labels = batch(seed=2)
    labels[0, 6:] = -100  # ignored positions
    start = torch.zeros(B, 1, dtype=torch.long)  # decoder_start_token_id
    shifted = torch.cat([start, labels[:, :-1]], dim=1)  # labels shifted right, as HF does
    shifted = shifted.masked_fill(shifted == -100, 0)  # -100 -> pad
    with torch.no_grad():
        expected = hf(input_ids=x, attention_mask=mask, labels=labels).loss
        got = t5_loss(t5(x, shifted, mask), labels)
    assert expected > 1.0
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_parameter_counts() -> None:
    hf, t5 = make_pair()
    theirs = sum(p.numel() for p in hf.parameters())
    assert t5.num_parameters() == theirs == 64_272  # tied head counted once
    _, t5_untied = make_pair(tie_word_embeddings=False)
    assert t5_untied.num_parameters() == 64_272 + V * D
    with torch.device("meta"):  # shapes only: no 240 MB of float32
        ours = T5(T5Config.small())
        small = transformers.T5ForConditionalGeneration(transformers.T5Config())
    assert ours.num_parameters() == 60_506_624
    assert sum(p.numel() for p in small.parameters()) == 60_506_624
    assert T5(T5Config.tiny()).num_parameters() == 173_056


# --------------------------------------------------------------------------------------------
# Load errors name the tensor
# --------------------------------------------------------------------------------------------


class _Wrapped(torch.nn.Module):
    """A T5ForConditionalGeneration whose state_dict has been tampered with."""

    def __init__(self, hf: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = hf.config
        self._state = state

    def state_dict(self, *args: object, **kwargs: object) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return dict(self._state)


def test_missing_tensor_is_named(pair: tuple[torch.nn.Module, T5]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    del state["decoder.block.2.layer.1.EncDecAttention.v.weight"]
    with pytest.raises(ValueError, match=re.escape("decoder.blocks.2.cross_attn.v_proj.weight")):
        T5.from_hf(_Wrapped(hf, state))
    state = dict(hf.state_dict())
    del state["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    with pytest.raises(
        ValueError, match=re.escape("encoder.relative_bias.relative_attention_bias")
    ):
        T5.from_hf(_Wrapped(hf, state))


def test_misshapen_and_unexpected_tensors_are_named(pair: tuple[torch.nn.Module, T5]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["encoder.block.1.layer.1.DenseReluDense.wo.weight"] = torch.zeros(D, FF + 1)
    with pytest.raises(ValueError, match=r"shape mismatch copying encoder\.block\.1\.layer\.1\.DenseReluDense\.wo\.weight into encoder\.blocks\.1\.ff\.wo\.weight"):  # fmt: skip
        T5.from_hf(_Wrapped(hf, state))
    state = dict(hf.state_dict())
    state["encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"] = torch.zeros(
        8, H
    )
    with pytest.raises(ValueError, match=r"block\.1\.layer\.0\.SelfAttention\.relative_attention_bias.* has no counterpart"):  # fmt: skip
        T5.from_hf(_Wrapped(hf, state))


def test_inconsistent_head_and_unsupported_config_refused(pair: tuple[torch.nn.Module, T5]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(ValueError, match="lm_head.weight differs from shared.weight"):
        T5.from_hf(_Wrapped(hf, state))
    assert T5.config_from_hf(hf_config(d_kv=10)).d_kv == 10  # T5 v1.1: heads * d_kv != d_model
    for proj in ("gated-silu", "gelu", "gated-relu"):  # not implemented: refused, named
        with pytest.raises(ValueError, match=rf"feed_forward_proj must be one of .*got '{proj}'"):
            T5.config_from_hf(hf_config(feed_forward_proj=proj))
    with pytest.raises(ValueError, match="config must be an encoder-decoder T5"):
        T5.config_from_hf(hf_config(is_decoder=True))
    with pytest.raises(TypeError, match="T5ForConditionalGeneration"):
        T5.from_hf(torch.nn.Linear(2, 3))


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


def hf_greedy(hf: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor, new: int) -> torch.Tensor:
    """Plain greedy search in transformers: one beam, no forced or minimum tokens. Its own KV
    cache is off: transformers 5.24 sizes it by num_layers and fails when the decoder is deeper
    (num_decoder_layers=3 here); the tokens do not depend on it."""
    return hf.generate(input_ids=x, attention_mask=mask, do_sample=False, num_beams=1,
                       max_new_tokens=new, min_length=0, forced_bos_token_id=None,
                       forced_eos_token_id=None, no_repeat_ngram_size=0,
                       use_cache=False)  # fmt: skip


@pytest.fixture(scope="module")
def untied() -> tuple[torch.nn.Module, T5]:
    """An untied pair whose greedy outputs vary and reach eos (id 1) in some rows (seed 4); a
    tied random T5 mostly repeats its start token (its logits favour the input embedding)."""
    return make_pair(seed=4, tie_word_embeddings=False)


def test_greedy_equals_hf_generate_with_eos_and_padding(
    untied: tuple[torch.nn.Module, T5], pair: tuple[torch.nn.Module, T5]
) -> None:
    hf, t5 = untied
    x, mask, _ = batch(seed=5)
    expected = hf_greedy(hf, x, mask, 12)
    for use_cache in (True, False):
        got = t5.generate(x, 12, mask, use_cache=use_cache)
        assert torch.equal(got, expected)
    assert got.shape == (B, 13) and (got[:, 0] == 0).all()  # starts at decoder_start_token_id
    assert got[0, 6] == got[1, 3] == 1 and (got[0, 7:] == 0).all() and (got[1, 4:] == 0).all()
    assert len(set(got[2].tolist())) > 5 and (got[2] != 1).all()  # row 2 goes on, varied
    hf_tied, t5_tied = pair
    torch.testing.assert_close(t5_tied.generate(x, 6, mask), hf_greedy(hf_tied, x, mask, 6))


def test_generation_stops_when_all_rows_finish(untied: tuple[torch.nn.Module, T5]) -> None:
    hf, t5 = untied
    x, mask, _ = batch(seed=5)
    got = t5.generate(x[:2], 12, mask[:2])  # both rows emit eos, the last at step 6
    assert got.shape == (2, 7) and torch.equal(got, hf_greedy(hf, x[:2], mask[:2], 12))
    assert t5.generate(x, 0, mask).tolist() == [[0]] * B


def test_cached_decode_equals_full_decode(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    x, mask, y = batch(seed=7)
    with torch.no_grad():
        memory = t5.encode(x, mask)
        full = t5.decode(y, memory, mask)
        cache = t5.new_cache()
        first = t5.decode(y[:, :3], memory, mask, cache=cache)  # 3 tokens, then one at a time
        steps = [t5.decode(y[:, t : t + 1], memory, mask, cache=cache) for t in range(3, T_DEC)]
    assert cache[0].length == T_DEC and cache[0].cross_attn.length == T_ENC
    torch.testing.assert_close(torch.cat([first, *steps], dim=1), full, atol=1e-5, rtol=0)


def test_sampling_cached_equals_uncached_and_keeps_mode(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    x, mask, _ = batch(seed=8)
    runs = [
        t5.generate(
            x,
            10,
            mask,
            do_sample=True,
            temperature=1.5,
            top_k=20,
            generator=torch.Generator().manual_seed(9),
            use_cache=c,
        )  # fmt: skip
        for c in (True, False)
    ]
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], t5.generate(x, 10, mask))
    t5.train()
    try:
        t5.generate(x, 2, mask)
        assert t5.training
    finally:
        t5.eval()


# --------------------------------------------------------------------------------------------
# Bad input and config validation
# --------------------------------------------------------------------------------------------


def test_bad_input(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    x, mask, y = batch()
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(batch, T_enc\) = \(3, 15\)"):  # fmt: skip
        t5(x, y, mask[:, :-1])
    with pytest.raises(ValueError, match=r"attention_mask must hold only 1 \(token\) and 0 \(padding\)"):
        t5(x, y, mask * 0.5)
    with pytest.raises(TypeError, match="attention_mask must be a Tensor"):
        t5(x, y, mask.tolist())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"input_ids ids must lie in \[0, 97\)"):
        t5(x + V, y)
    with pytest.raises(ValueError, match=r"decoder_input_ids ids must lie in \[0, 97\)"):
        t5(x, y - 10, mask)
    with pytest.raises(TypeError, match="decoder_input_ids must hold integer token ids"):
        t5(x, y.float())
    with pytest.raises(ValueError, match="decoder_input_ids must have batch size 3"):
        t5(x, y[:2], mask)
    memory = t5.encode(x, mask)
    with pytest.raises(ValueError, match=r"memory must have shape \(batch=3, T_enc, d_model=36\)"):
        t5.decode(y, memory[..., :-1], mask)
    with pytest.raises(ValueError, match="one DecoderCache per decoder block"):
        t5.decode(y, memory, mask, cache=[DecoderCache()])
    with pytest.raises(ValueError, match="max_new_tokens"):
        t5.generate(x, -1)
    with pytest.raises(ValueError, match="temperature"):
        t5.generate(x, 2, do_sample=True, temperature=0.0)
    with pytest.raises(ValueError, match="top_k"):
        t5.generate(x, 2, top_k=0)
    with pytest.raises(ValueError, match=r"labels must have shape \(3, 9\)"):
        t5_loss(torch.zeros(B, T_DEC, V), y[:, :-1])


def test_config_validation() -> None:
    assert T5Config(d_model=36, num_heads=3, d_kv=10).d_kv == 10  # heads * d_kv != d_model
    with pytest.raises(ValueError, match="d_kv must be >= 1"):
        T5Config(d_kv=0)
    with pytest.raises(ValueError, match="feed_forward_proj"):
        T5Config(feed_forward_proj="swiglu")
    with pytest.raises(ValueError, match="dropout"):
        T5Config(dropout=1.0)
    with pytest.raises(ValueError, match="num_decoder_layers must be >= 1"):
        T5Config(num_decoder_layers=0)
    with pytest.raises(ValueError, match="relative_attention_max_distance must exceed"):
        T5Config(relative_attention_num_buckets=32, relative_attention_max_distance=16)
    with pytest.raises(ValueError, match=r"eos_token_id must be an int in \[0, vocab_size=128\)"):
        T5Config.tiny(eos_token_id=128)
    tiny = T5Config.tiny(vocab_size=300)
    assert (tiny.vocab_size, tiny.d_model, tiny.num_heads, tiny.d_kv, tiny.decoder_layers) == (
        300, 64, 4, 16, 2,
    )  # fmt: skip
    small = T5Config.small()
    assert (small.num_layers, small.decoder_layers, small.d_model, small.d_ff) == (6, 6, 512, 2048)
