"""Tests of mtlib.models.gpt: GPT-2 parity with Hugging Face, generation, sampling, errors.

Reference models are random-init ``transformers`` GPT-2s built from small configs (no
download) with odd sizes: vocabulary 53, 41 positions, d_model 30 with 5 heads (d_head 6),
d_ff 46, 3 layers; batch 2 with sequences of 17 tokens.
"""

from __future__ import annotations

import logging
import re

import pytest
import torch

from mtlib.attention import KVCache
from mtlib.models import GPT, GPTConfig
from mtlib.models.gpt import top_k_filter, top_p_filter

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)

V, P, D, H, FF, L = 53, 41, 30, 5, 46, 3


def hf_config(**overrides: object) -> object:
    fields = dict(vocab_size=V, n_positions=P, n_embd=D, n_layer=L, n_head=H, n_inner=FF,
                  bos_token_id=0, eos_token_id=0, pad_token_id=0)  # fmt: skip
    fields.update(overrides)
    return transformers.GPT2Config(**fields)


@pytest.fixture(scope="module")
def pair() -> tuple[torch.nn.Module, GPT]:
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(hf_config()).eval()
    with torch.no_grad():  # larger weights than GPT-2's init (std 0.02): logits of order 1,
        for name, p in hf.named_parameters():  # and LayerNorm/bias values that are not 1 or 0
            p.normal_(1.0 if "ln_" in name and name.endswith("weight") else 0.0, 0.25)
    return hf, GPT.from_hf(hf)


def tokens(batch: int = 2, length: int = 17, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (batch, length), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------------------------
# Loading and parity
# --------------------------------------------------------------------------------------------


def test_config_from_hf(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    c = gpt.config
    assert (c.vocab_size, c.block_size, c.d_model, c.num_heads, c.d_ff, c.n_layer) == (
        V,
        P,
        D,
        H,
        FF,
        L,
    )
    assert c.layer_norm_eps == 1e-5 and c.dropout == pytest.approx(0.1)
    assert not gpt.training  # the HF model was in eval mode
    assert gpt.lm_head.weight is gpt.wte.weight


def test_logits_equal_hf(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, gpt = pair
    x = tokens()
    with torch.no_grad():
        expected = hf(x).logits
        got = gpt(x)
    assert got.shape == (2, 17, V)
    assert expected.std() > 0.5  # not a trivially small output
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_logits_equal_hf_full_context_and_one_token(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, gpt = pair
    for x in (tokens(3, P, seed=2), tokens(4, 1, seed=3)):
        with torch.no_grad():
            torch.testing.assert_close(gpt(x), hf(x).logits, atol=1e-4, rtol=0)


def test_from_bare_gpt2model() -> None:
    torch.manual_seed(1)
    lm = transformers.GPT2LMHeadModel(hf_config()).eval()
    body = lm.transformer  # a GPT2Model
    gpt = GPT.from_hf(body)
    with torch.no_grad():
        torch.testing.assert_close(gpt(tokens()), lm(tokens()).logits, atol=1e-4, rtol=0)


def test_dropout_is_off_in_eval_only(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    x = tokens()
    with torch.no_grad():
        evaluated = gpt(x)
        gpt.train()
        try:
            trained = gpt(x)
        finally:
            gpt.eval()
    assert (trained - evaluated).abs().max() > 1e-3  # dropout 0.1 changes the output


def test_parameter_count_equals_hf(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, gpt = pair
    assert gpt.num_parameters() == sum(p.numel() for p in hf.parameters()) == 22_908
    assert gpt.num_parameters(exclude_positions=True) == 22_908 - P * D


def test_gpt2_small_parameter_count() -> None:
    with torch.device("meta"):  # shapes only: no 0.5 GB of float32
        ours = GPT(GPTConfig.gpt2_small())
        theirs = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    assert ours.num_parameters() == 124_439_808
    assert sum(p.numel() for p in theirs.parameters()) == 124_439_808
    c = GPTConfig.gpt2_small()
    assert (c.n_layer, c.d_model, c.num_heads, c.block_size, c.vocab_size, c.dropout) == (
        12, 768, 12, 1024, 50257, 0.1,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Load errors name the tensor
# --------------------------------------------------------------------------------------------


class _Wrapped(torch.nn.Module):
    """A GPT2LMHeadModel whose state_dict has been tampered with."""

    def __init__(self, hf: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = hf.config
        self._state = state

    def state_dict(self, *args: object, **kwargs: object) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return dict(self._state)


def test_missing_tensor_is_named(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    del state["transformer.h.1.mlp.c_fc.bias"]
    with pytest.raises(ValueError, match=re.escape("h.1.ff.linear1.bias")):
        GPT.from_hf(_Wrapped(hf, state))


def test_misshapen_tensor_is_named(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["transformer.h.2.mlp.c_proj.weight"] = torch.zeros(FF + 1, D)
    with pytest.raises(ValueError, match=r"shape mismatch copying h\.2\.mlp\.c_proj\.weight"):
        GPT.from_hf(_Wrapped(hf, state))


def test_unexpected_tensor_is_named(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["transformer.h.0.attn.rotary.freqs"] = torch.zeros(3)
    with pytest.raises(ValueError, match=r"h\.0\.attn\.rotary\.freqs .* has no counterpart"):
        GPT.from_hf(_Wrapped(hf, state))


def test_untied_head_and_unsupported_config_refused(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, _ = pair
    state = dict(hf.state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(ValueError, match="lm_head.weight differs from wte.weight"):
        GPT.from_hf(_Wrapped(hf, state))
    relu = transformers.GPT2LMHeadModel(hf_config(activation_function="relu"))
    with pytest.raises(ValueError, match="activation_function"):
        GPT.from_hf(relu)
    scaled = transformers.GPT2LMHeadModel(hf_config(scale_attn_by_inverse_layer_idx=True))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        GPT.from_hf(scaled)
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        GPT.from_hf(torch.nn.Linear(2, 3))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


def test_greedy_tokens_equal_hf_generate(pair: tuple[torch.nn.Module, GPT]) -> None:
    hf, gpt = pair
    prompt = tokens(3, 6, seed=4)
    new = 25
    expected = hf.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=new,
        min_new_tokens=new,  # no early stop at eos
        do_sample=False,
        pad_token_id=0,
        eos_token_id=None,
    )
    for use_cache in (True, False):
        got = gpt.generate(prompt, new, use_cache=use_cache)
        assert got.shape == (3, 6 + new)
        assert torch.equal(got, expected)
    assert len(set(expected[:, 6:].flatten().tolist())) > 3  # not one repeated token


def test_cached_equals_uncached_logits_step_by_step(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    x = tokens(2, 13, seed=5)
    cache = gpt.new_cache()
    with torch.no_grad():
        full = gpt(x)
        first = gpt(x[:, :4], cache=cache)  # a prompt of 4, then one token at a time
        steps = [gpt(x[:, t : t + 1], cache=cache) for t in range(4, 13)]
    assert cache[0].length == 13 and len(cache) == L
    torch.testing.assert_close(torch.cat([first, *steps], dim=1), full, atol=1e-5, rtol=0)


def test_last_only_is_the_last_position_with_and_without_a_cache(
    pair: tuple[torch.nn.Module, GPT],
) -> None:
    _, gpt = pair
    x = tokens(3, 11, seed=6)
    with torch.no_grad():
        full = gpt(x)  # (B, T, V)
        last = gpt(x, last_only=True)
        cache = gpt.new_cache()
        gpt(x[:, :7], cache=cache)
        chunk = gpt(x[:, 7:], cache=cache, last_only=True)  # 4 new tokens after 7 cached ones
    assert last.shape == chunk.shape == (3, 1, V)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-5, rtol=0)
    torch.testing.assert_close(chunk, full[:, -1:], atol=1e-5, rtol=0)
    assert cache[0].length == 11  # every position's keys are cached, not only the last one's


def test_one_query_step_skips_the_causal_mask_and_is_still_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-token decode step with is_causal sees every cached key: no mask is built."""
    import mtlib.attention as attention

    torch.manual_seed(0)
    fused = attention.MultiHeadAttention(12, 3, kdim=7, vdim=5).eval()
    explicit = attention.MultiHeadAttention(12, 3, kdim=7, vdim=5).eval()
    explicit.load_state_dict(fused.state_dict())
    explicit.fused = False
    x, memory = torch.randn(2, 9, 12), torch.randn(2, 9, 7)
    with torch.no_grad():
        full, _ = fused(x, memory, memory[..., :5], is_causal=True)  # (B, 9, 12)
        built: list[tuple[int, ...]] = []
        original = attention._masks.causal_mask
        monkeypatch.setattr(
            attention._masks, "causal_mask",
            lambda *a, **kw: built.append(a) or original(*a, **kw),
        )  # fmt: skip
        # the last query alone, against all 9 keys: it is the last position, so it sees them all
        last, _ = fused(x[:, 8:9], memory, memory[..., :5], is_causal=True)
        last_explicit, weights = explicit(x[:, 8:9], memory, memory[..., :5], is_causal=True, need_weights=True)
    assert built == []  # neither path built a (1, T_k) mask of ones
    torch.testing.assert_close(last, full[:, 8:9], atol=1e-5, rtol=0)
    torch.testing.assert_close(last_explicit, full[:, 8:9], atol=1e-5, rtol=0)
    assert weights is not None and bool((weights > 0).all())


def test_cached_equals_uncached_sampling(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    prompt = tokens(2, 5, seed=6)
    runs = [
        gpt.generate(
            prompt,
            30,
            do_sample=True,
            temperature=1.3,
            use_cache=c,
            generator=torch.Generator().manual_seed(7),
        )  # fmt: skip
        for c in (True, False)
    ]
    assert torch.equal(runs[0], runs[1])


def test_sampling_reproducible_and_varied(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    prompt = tokens(2, 5, seed=8)

    def sample(seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        return gpt.generate(prompt, 30, do_sample=True, temperature=2.0, generator=gen)

    assert torch.equal(sample(3), sample(3))
    assert not torch.equal(sample(3), sample(4))
    greedy = gpt.generate(prompt, 30)
    assert not torch.equal(sample(3), greedy)


def test_top_k_one_and_tiny_top_p_equal_greedy(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    prompt = tokens(3, 4, seed=9)
    greedy = gpt.generate(prompt, 20)
    gen = torch.Generator().manual_seed(0)
    k1 = gpt.generate(prompt, 20, do_sample=True, top_k=1, temperature=5.0, generator=gen)
    p0 = gpt.generate(prompt, 20, do_sample=True, top_p=1e-6, temperature=5.0, generator=gen)
    assert torch.equal(k1, greedy) and torch.equal(p0, greedy)


def test_generate_keeps_train_mode_and_crops_without_cache() -> None:
    torch.manual_seed(2)
    gpt = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, d_model=12, num_heads=3, d_ff=20,
                        dropout=0.2))  # fmt: skip
    gpt.train()
    out = gpt.generate(torch.zeros(2, 3, dtype=torch.long), 20, use_cache=False)  # 23 > 8
    assert out.shape == (2, 23) and gpt.training
    with pytest.raises(ValueError, match="block_size=8; use use_cache=False"):
        gpt.generate(torch.zeros(2, 3, dtype=torch.long), 6)
    assert gpt.generate(torch.zeros(1, 2, dtype=torch.long), 0).shape == (1, 2)



def hf_warp(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Hugging Face's sampling logits, in the order its ``generate`` applies the warpers."""
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = [TemperatureLogitsWarper(temperature)]
    warpers += [TopKLogitsWarper(top_k)] if top_k is not None else []
    warpers += [TopPLogitsWarper(top_p)] if top_p is not None else []
    for warp in warpers:
        logits = warp(None, logits)  # type: ignore[arg-type]  # no warper reads input_ids
    return logits


SAMPLING = [(2.0, None, 0.6), (0.7, 10, None), (1.5, 20, 0.8), (0.5, None, 0.9), (3.0, 7, 0.5)]


def test_temperature_comes_before_the_filters_by_hand() -> None:
    # issue 25 (G4): logits [2, 1, 0], T = 2, top_p = 0.6: softmax([1, 0.5, 0]) = [0.51, 0.31,
    # 0.19] keeps ids 0 and 1, renormalised [0.62, 0.38, 0] (the filter first would keep id 0 only)
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    probs = hf_warp(logits, 2.0, None, 0.6).softmax(-1)
    torch.testing.assert_close(probs, torch.tensor([[0.6225, 0.3775, 0.0]]), atol=1e-4, rtol=0)
    draws = GPT._choose(logits.expand(4000, 3), True, 2.0, None, 0.6, torch.Generator().manual_seed(0))
    freq = torch.bincount(draws[:, 0], minlength=3) / 4000
    torch.testing.assert_close(freq, probs[0], atol=0.03, rtol=0)


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), SAMPLING)
def test_sampling_matches_transformers_warpers(temperature: float, top_k: int | None, top_p: float | None) -> None:
    # several random rows of logits, each drawn 500 times: the same draws as torch.multinomial on
    # the probabilities of transformers' temperature, top-k and top-p warpers, with the same seed
    logits = torch.randn(6, V, generator=torch.Generator().manual_seed(1)) * 2.0  # (rows, V)
    many = logits.repeat(500, 1)  # (500 * rows, V)
    ours = GPT._choose(many, True, temperature, top_k, top_p, torch.Generator().manual_seed(2))
    probs = hf_warp(many, temperature, top_k, top_p).softmax(-1)  # (500 * rows, V)
    expected = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(2))
    assert torch.equal(ours, expected)
    assert (probs[:6] > 0).sum(-1).min() >= 2  # moderate filters: something left to choose from


def test_generate_samples_as_transformers_warpers(pair: tuple[torch.nn.Module, GPT]) -> None:
    # the generation loop with the warpers of transformers applied to mtlib's own logits
    _, gpt = pair
    prompt = tokens(2, 5, seed=10)
    out = gpt.generate(prompt, 12, do_sample=True, temperature=1.7, top_k=12, top_p=0.7,
                       use_cache=False, generator=torch.Generator().manual_seed(3))  # fmt: skip
    gen, idx = torch.Generator().manual_seed(3), prompt
    with torch.no_grad():
        for _ in range(12):  # the same logits (recomputed), transformers' warpers
            probs = hf_warp(gpt(idx)[:, -1].float(), 1.7, 12, 0.7).softmax(-1)  # (B, V)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=gen)], dim=1)
    assert torch.equal(out, idx)  # (cached == uncached sampling: test_cached_equals_uncached_sampling)

def test_filters() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 3.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    kept = top_k_filter(logits, 2).isfinite()
    assert kept.tolist() == [[True, False, False, False, True], [True] * 5]  # ties kept
    probs = torch.softmax(torch.tensor([1.5, 0.2, 3.0, -2.0, 0.4, 1.0]), dim=-1)  # 6 ids
    # sorted: id 2 (0.667), id 0 (0.149), id 5 (0.090), id 4 (0.050), id 1 (0.041), id 3 (0.005)
    # cumulative: 0.667, 0.815, 0.906, ...
    logits = probs.log()[None]
    assert top_p_filter(logits, 0.6).isfinite().nonzero()[:, 1].tolist() == [2]
    assert sorted(top_p_filter(logits, 0.8).isfinite().nonzero()[:, 1].tolist()) == [0, 2]
    assert sorted(top_p_filter(logits, 0.85).isfinite().nonzero()[:, 1].tolist()) == [0, 2, 5]
    assert top_p_filter(logits, 1.0).isfinite().all()
    for bad in (0.0, 1.5, True):
        with pytest.raises(ValueError, match="top_p"):
            top_p_filter(logits, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(logits, 0)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


def test_bad_input(pair: tuple[torch.nn.Module, GPT]) -> None:
    _, gpt = pair
    with pytest.raises(TypeError, match="idx must hold integer token ids"):
        gpt(torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"idx must have shape \(batch, seq_len >= 1\)"):
        gpt(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 53\)"):
        gpt(torch.full((2, 5), V))
    with pytest.raises(ValueError, match="block_size=41"):
        gpt(torch.zeros(1, P + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="one KVCache per block"):
        gpt(tokens(), cache=[KVCache()])
    prompt = tokens(1, 3)
    with pytest.raises(ValueError, match="temperature"):
        gpt.generate(prompt, 2, do_sample=True, temperature=0.0)
    with pytest.raises(ValueError, match="top_k"):
        gpt.generate(prompt, 2, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        gpt.generate(prompt, 2, top_p=0.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        gpt.generate(prompt, -1)
    with pytest.raises(TypeError, match="max_new_tokens"):
        gpt.generate(prompt, 2.0)  # type: ignore[arg-type]


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="divisible by num_heads"):
        GPTConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        GPTConfig(block_size=0)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        GPTConfig(vocab_size=5.0)  # type: ignore[arg-type]
    tiny = GPTConfig.tiny(n_layer=2)
    assert tiny.n_layer == 2 and tiny.block_config().norm_first
    assert tiny.block_config().activation == "gelu_tanh"


def test_unequal_dropouts_refused_in_training_mode() -> None:
    # HF GPT-2 has three dropout rates; mtlib's GPT has one. A training-mode copy would
    # fine-tune with another rate than the model it copies, so it is refused; in eval mode
    # dropout does nothing and the copy is made (with resid_pdrop).
    hf = transformers.GPT2LMHeadModel(hf_config(attn_pdrop=0.3, embd_pdrop=0.1, resid_pdrop=0.0))
    with pytest.raises(ValueError, match=r"training mode with unequal dropout rates .*attn_pdrop.: 0\.3"):
        GPT.from_hf(hf.train())
    ours = GPT.from_hf(hf.eval())
    assert not ours.training and ours.config.dropout == 0.0
    same = transformers.GPT2LMHeadModel(hf_config(attn_pdrop=0.2, embd_pdrop=0.2, resid_pdrop=0.2))
    copy = GPT.from_hf(same.train())
    assert copy.training and copy.config.dropout == 0.2
