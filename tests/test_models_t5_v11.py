"""T5 v1.1 / Flan-T5-shaped checkpoints through mtlib.models.t5 (issue 25).

What these checkpoints change from the original T5: ``num_heads * d_kv != d_model``, the gated
GELU feed-forward (``feed_forward_proj="gated-gelu"``: ``wo(gelu_new(wi_0 x) * wi_1 x)``) and an
LM head of its own, without the ``d_model ** -0.5`` rescale of the decoder output. The reference
is a random-init ``transformers`` T5ForConditionalGeneration with odd sizes: vocabulary 61,
d_model 40 with 3 heads of d_kv 16 (inner width 48), d_ff 56, 2 encoder and 3 decoder layers, 8
position buckets with max distance 12; batch 3 with padding, 13 encoder and 6 decoder tokens.
"""

from __future__ import annotations

import logging

import pytest
import torch

from mtlib.blocks import GELUTanh
from mtlib.models.t5 import T5, T5Config, T5FeedForward, t5_loss

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)

V, D, H, DKV, FF, L_ENC, L_DEC = 61, 40, 3, 16, 56, 2, 3
B, T_ENC, T_DEC = 3, 13, 6


def make_pair(seed: int = 0, **overrides: object) -> tuple[torch.nn.Module, T5]:
    """A random T5 v1.1-shaped HF model (norm gains and position biases perturbed so that they
    matter, a head of its own) and mtlib's copy of it."""
    fields = dict(vocab_size=V, d_model=D, d_kv=DKV, d_ff=FF, num_layers=L_ENC,
                  num_decoder_layers=L_DEC, num_heads=H, relative_attention_num_buckets=8,
                  relative_attention_max_distance=12, decoder_start_token_id=0,
                  feed_forward_proj="gated-gelu", tie_word_embeddings=False)  # fmt: skip
    fields.update(overrides)
    torch.manual_seed(seed)
    hf = transformers.T5ForConditionalGeneration(transformers.T5Config(**fields)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "layer_norm" in name:
                p.normal_(1.0, 0.25)
            elif "relative_attention_bias" in name:
                p.normal_(0.0, 1.0)
        if fields["tie_word_embeddings"] is False:
            # transformers 5 ties the weights anyway (it only stops scaling the output); a v1.1
            # checkpoint has a head of its own
            hf.lm_head.weight = torch.nn.Parameter(torch.randn(V, D))
    return hf, T5.from_hf(hf)


@pytest.fixture(scope="module")
def pair() -> tuple[torch.nn.Module, T5]:
    return make_pair()


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Encoder ids (3, 13) with 13, 9 and 3 real tokens, and decoder ids (3, 6)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(2, V, (B, T_ENC), generator=gen)
    mask = torch.ones(B, T_ENC, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 3:] = 0
    x = x.masked_fill(mask == 0, 0)
    return x, mask, torch.randint(2, V, (B, T_DEC), generator=gen)


def test_from_hf_loads_v11_shapes(pair: tuple[torch.nn.Module, T5]) -> None:
    hf, t5 = pair
    c = t5.config
    assert (c.d_model, c.num_heads, c.d_kv, c.d_ff) == (D, H, DKV, FF) and H * DKV != D
    assert c.feed_forward_proj == "gated-gelu" and not c.tie_word_embeddings
    attn = t5.decoder.blocks[2].cross_attn
    assert attn is not None and (attn.head_dim, attn.inner_dim) == (DKV, H * DKV)
    assert attn.q_proj.weight.shape == (H * DKV, D) and attn.out_proj.weight.shape == (D, H * DKV)
    ff = t5.encoder.blocks[1].ff
    assert ff.gated and isinstance(ff.act, GELUTanh) and ff.wi_0.weight.shape == (FF, D)
    assert t5.lm_head.weight is not t5.shared.weight
    theirs = hf.state_dict()
    assert torch.equal(t5.lm_head.weight, theirs["lm_head.weight"])
    assert torch.equal(ff.wi_1.weight, theirs["encoder.block.1.layer.1.DenseReluDense.wi_1.weight"])
    assert torch.equal(attn.out_proj.weight, theirs["decoder.block.2.layer.1.EncDecAttention.o.weight"])  # fmt: skip


@pytest.mark.parametrize(
    ("proj", "tied"), [("gated-gelu", False), ("gated-gelu", True), ("relu", False), ("relu", True)]
)
def test_logits_equal_hf(proj: str, tied: bool) -> None:
    hf, t5 = make_pair(seed=3, feed_forward_proj=proj, tie_word_embeddings=tied)
    x, mask, y = batch()
    with torch.no_grad():
        expected = hf(input_ids=x, attention_mask=mask, decoder_input_ids=y).logits
        got = t5(x, y, mask)
    assert got.shape == (B, T_DEC, V) and expected.std() > 0.5
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-5)


def test_loss_and_gradients_equal_hf(pair: tuple[torch.nn.Module, T5]) -> None:
    hf, t5 = pair
    x, mask, labels = batch(seed=2)
    labels[0, 4:] = -100
    shifted = torch.cat([torch.zeros(B, 1, dtype=torch.long), labels[:, :-1]], dim=1)
    shifted = shifted.masked_fill(shifted == -100, 0)  # as HF shifts the labels right
    expected = hf(input_ids=x, attention_mask=mask, labels=labels).loss
    got = t5_loss(t5(x, shifted, mask), labels)
    assert expected > 1.0
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    hf.zero_grad()
    t5.zero_grad()
    expected.backward()
    got.backward()
    pairs = {  # (ours, theirs): the gate, the linear half, a non-square attention projection, the head
        "encoder.blocks.0.ff.wi_0": "encoder.block.0.layer.1.DenseReluDense.wi_0",
        "decoder.blocks.1.ff.wi_1": "decoder.block.1.layer.2.DenseReluDense.wi_1",
        "decoder.blocks.0.self_attn.out_proj": "decoder.block.0.layer.0.SelfAttention.o",
        "encoder.blocks.1.self_attn.q_proj": "encoder.block.1.layer.0.SelfAttention.q",
        "lm_head": "lm_head",
    }
    ours, theirs = dict(t5.named_parameters()), dict(hf.named_parameters())
    for a, b in pairs.items():
        g_ours, g_theirs = ours[f"{a}.weight"].grad, theirs[f"{b}.weight"].grad
        assert g_ours is not None and g_theirs is not None and g_theirs.abs().max() > 0
        torch.testing.assert_close(g_ours, g_theirs, atol=1e-5, rtol=1e-4, msg=a)


def test_greedy_generation_equals_hf() -> None:
    # eos id 3, a token this random model emits, so that rows finish early and are padded
    hf, t5 = make_pair(eos_token_id=3)
    assert t5.config.eos_token_id == 3
    x, mask, _ = batch(seed=5)
    expected = hf.generate(input_ids=x, attention_mask=mask, do_sample=False, num_beams=1,
                           max_new_tokens=10, min_length=0, forced_bos_token_id=None,
                           forced_eos_token_id=None, no_repeat_ngram_size=0,
                           use_cache=False)  # fmt: skip
    assert len(set(expected[:, 1:].flatten().tolist())) > 4  # not a constant output
    assert expected[2, 2] == 3 and (expected[2, 3:] == 0).all()  # finished early, then padding
    assert (expected[1] != 3).all()  # another row runs to the end
    for use_cache in (True, False):
        assert torch.equal(t5.generate(x, 10, mask, use_cache=use_cache), expected)


def test_cached_decode_equals_full_decode(pair: tuple[torch.nn.Module, T5]) -> None:
    _, t5 = pair
    x, mask, y = batch(seed=7)
    with torch.no_grad():
        memory = t5.encode(x, mask)
        full = t5.decode(y, memory, mask)
        cache = t5.new_cache()
        first = t5.decode(y[:, :2], memory, mask, cache=cache)
        steps = [t5.decode(y[:, t : t + 1], memory, mask, cache=cache) for t in range(2, T_DEC)]
    assert cache[0].self_attn.k is not None and cache[0].self_attn.k.shape == (B, H, T_DEC, DKV)
    torch.testing.assert_close(torch.cat([first, *steps], dim=1), full, atol=2e-5, rtol=1e-5)


def test_gated_feed_forward_equals_hf() -> None:
    torch.manual_seed(6)
    config = transformers.T5Config(
        d_model=D, d_ff=FF, feed_forward_proj="gated-gelu", dropout_rate=0.0
    )
    theirs = transformers.models.t5.modeling_t5.T5DenseGatedActDense(config).eval()
    ours = T5FeedForward(D, FF, gated=True)
    ours.load_state_dict(theirs.state_dict())
    x = 3 * torch.randn(B, 7, D)  # large enough for gelu's tanh form to differ from erf's
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)
    exact = torch.nn.functional.gelu(ours.wi_0(x)) * ours.wi_1(x)  # not what T5 v1.1 uses
    assert (ours.wo(exact) - theirs(x)).abs().max() > 1e-5


def test_flan_small_preset_counts_parameters() -> None:
    config = T5Config.flan_small()
    assert (config.d_model, config.num_heads, config.d_kv, config.d_ff) == (512, 6, 64, 1024)
    with torch.device("meta"):  # shapes only
        ours = T5(config)
        hf = transformers.T5ForConditionalGeneration(transformers.T5Config(
            d_ff=1024, num_layers=8, num_heads=6, feed_forward_proj="gated-gelu",
            tie_word_embeddings=False))  # fmt: skip
    assert T5.config_from_hf(hf.config) == config
    tied_head = 32128 * 512  # transformers 5 ties it; Flan-T5's own head is one more matrix
    assert ours.num_parameters() == sum(p.numel() for p in hf.parameters()) + tied_head
    assert ours.num_parameters() == 76_961_152  # google/flan-t5-small
