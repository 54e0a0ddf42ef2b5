"""Tests of the efficient-attention pieces: tiled (online-softmax) attention and the KV cache's
in-place growth. Sizes are odd and non-square on purpose (q_len != k_len, d_v != d_k)."""

from __future__ import annotations

import pytest
import torch

from mtlib.attention import (
    KVCache,
    MultiHeadAttention,
    scaled_dot_product_attention,
    tiled_attention,
)


def _qkv(
    q_len: int,
    k_len: int,
    *,
    d_k: int = 7,
    d_v: int = 5,
    lead: tuple[int, ...] = (2, 3),
    seed: int = 0,
):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, q_len, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(*lead, k_len, d_k, generator=g, dtype=torch.float64)
    v = torch.randn(*lead, k_len, d_v, generator=g, dtype=torch.float64)
    return q, k, v


# ---------------------------------------------------------------------------- tiled_attention


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("q_len", "k_len", "block"), [(13, 29, 4), (29, 13, 5), (17, 17, 3), (9, 31, 64), (1, 23, 6)]
)
def test_tiled_equals_explicit(causal: bool, q_len: int, k_len: int, block: int) -> None:
    q, k, v = _qkv(q_len, k_len)
    q = q * 3  # large scores: the running max must be right, or exp overflows / loses mass
    expected = (
        scaled_dot_product_attention(q, k, v, is_causal=causal)
        if k_len >= q_len or not causal
        else None
    )
    got = tiled_attention(q, k, v, causal=causal, block_size=block)
    assert got.shape == (2, 3, q_len, 5)
    if expected is None:  # more queries than keys: the first queries see nothing -> zeros
        visible = torch.arange(q_len)[:, None] + (k_len - q_len) >= torch.arange(k_len)[None, :]
        expected = scaled_dot_product_attention(q, k, v, mask=visible.expand(2, 3, -1, -1))
        assert (got[..., : q_len - k_len, :] == 0).all()
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


def test_tiled_float32_tolerance_and_scale() -> None:
    q, k, v = (t.float() for t in _qkv(37, 53, lead=(4,)))
    torch.testing.assert_close(
        tiled_attention(q, k, v, block_size=8),
        scaled_dot_product_attention(q, k, v),
        atol=1e-5,
        rtol=0,
    )
    torch.testing.assert_close(
        tiled_attention(q, k, v, block_size=8, scale=0.3),
        scaled_dot_product_attention(q, k, v, scale=0.3),
        atol=1e-5,
        rtol=0,
    )
    # a block size larger than the sequence is one block: still exact
    torch.testing.assert_close(
        tiled_attention(q, k, v, block_size=1000),
        scaled_dot_product_attention(q, k, v),
        atol=1e-5,
        rtol=0,
    )


def test_tiled_rescaling_matters() -> None:
    """Scores that rise from block to block: skipping the exp(m - m') rescale would be wrong."""
    k_len = 12
    q = torch.ones(1, 1, 3, dtype=torch.float64)
    k = (
        torch.arange(k_len, dtype=torch.float64)[None, :, None].expand(1, k_len, 3) * 2.0
    )  # increasing scores
    v = torch.randn(1, k_len, 4, dtype=torch.float64)
    torch.testing.assert_close(
        tiled_attention(q, k, v, block_size=2), scaled_dot_product_attention(q, k, v)
    )


def test_tiled_gradients_match() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv(6, 11, lead=(2,)))
    tiled_attention(q, k, v, causal=True, block_size=4).square().sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    scaled_dot_product_attention(q, k, v, is_causal=True).square().sum().backward()
    for got, t in zip(grads, (q, k, v), strict=True):
        torch.testing.assert_close(got, t.grad)
        assert torch.isfinite(got).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_half_precision_accumulates_in_float32(dtype: torch.dtype, causal: bool) -> None:
    """Half inputs: the running m, l and acc are float32 (as FlashAttention keeps them), so the
    error is no worse than the explicit path's, which also computes in float32. Accumulating in
    half had 9x (fp16) and 3.8x (bf16) the explicit path's error over 2048 keys."""
    q, k, v = _qkv(97, 611, d_k=40, d_v=24, lead=(2,), seed=3)
    q = q * 2  # sharper weights: more rescaling between blocks
    qh, kh, vh = (t.to(dtype) for t in (q, k, v))
    exact = scaled_dot_product_attention(*(t.double() for t in (qh, kh, vh)), is_causal=causal)
    tiled = tiled_attention(qh, kh, vh, causal=causal, block_size=32)
    explicit = scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
    assert tiled.dtype == dtype and tiled.shape == (2, 97, 24)
    err_tiled = (tiled.double() - exact).abs().max().item()
    err_explicit = (explicit.double() - exact).abs().max().item()
    assert err_tiled <= 1.5 * err_explicit, (err_tiled, err_explicit)


def test_tiled_bad_input() -> None:
    q, k, v = _qkv(4, 6)
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        tiled_attention(q, k, v, block_size=0)
    with pytest.raises(TypeError, match="block_size must be an int"):
        tiled_attention(q, k, v, block_size=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"positional argument"):
        tiled_attention(q, k, v, True)  # type: ignore[misc]
    with pytest.raises(ValueError, match="k"):
        tiled_attention(q, k[..., :3], v)


# ---------------------------------------------------------------------------- KV cache growth


def _steps(cache: KVCache, steps: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ks, vs = [], []
    for n in steps:
        k, v = torch.randn(2, 3, n, 4, generator=g), torch.randn(2, 3, n, 4, generator=g)
        ks.append(k)
        vs.append(v)
        out_k, out_v = cache.update(k, v)
        torch.testing.assert_close(out_k, torch.cat(ks, dim=2), atol=0, rtol=0)
        torch.testing.assert_close(out_v, torch.cat(vs, dim=2), atol=0, rtol=0)
    return torch.cat(ks, dim=2), torch.cat(vs, dim=2)


def test_cache_grows_in_place_and_geometrically() -> None:
    cache = KVCache()
    steps = [5] + [1] * 60 + [7, 1, 1]  # a prompt, then one token at a time
    k_all, _ = _steps(cache, steps)
    assert cache.length == sum(steps) == k_all.shape[2]
    # geometric growth: the buffer is at most twice the longest content, and few reallocations
    capacity = cache._buffers[0].shape[2]
    assert sum(steps) <= capacity <= 2 * sum(steps)
    reallocations, ptr = 0, None
    cache2 = KVCache()
    g = torch.Generator().manual_seed(2)
    for n in steps:
        cache2.update(torch.randn(2, 3, n, 4, generator=g), torch.randn(2, 3, n, 4, generator=g))
        if cache2._buffers is not None and cache2._buffers[0].data_ptr() != ptr:
            reallocations, ptr = reallocations + 1, cache2._buffers[0].data_ptr()
    assert reallocations <= 4  # 16, 32, 64, 128 positions for 74 tokens
    # between reallocations the cached positions are not copied: k is a view of the buffer
    assert cache2.k.data_ptr() == cache2._buffers[0].data_ptr()


def test_cache_earlier_views_unchanged_and_reset() -> None:
    cache = KVCache()
    first_k, _ = cache.update(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4))
    second_k, _ = cache.update(torch.full((1, 2, 1, 4), 2.0), torch.zeros(1, 2, 1, 4))
    snapshot = second_k.clone()
    cache.update(torch.full((1, 2, 2, 4), 3.0), torch.zeros(1, 2, 2, 4))
    assert (first_k == 1).all() and torch.equal(second_k, snapshot)  # writes go after them
    cache.reset()
    assert cache.length == 0 and cache.k is None and cache._buffers is None


def test_cache_replaced_tensors_are_respected() -> None:
    """Beam search assigns reordered tensors to cache.k/v: the buffer must not resurrect old ones."""
    cache = KVCache()
    _steps(cache, [3, 1, 1])
    order = torch.tensor([1, 0])
    cache.k, cache.v = cache.k.index_select(0, order), cache.v.index_select(0, order)
    expected_k = cache.k.clone()
    new_k, new_v = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)
    out_k, _ = cache.update(new_k, new_v)
    torch.testing.assert_close(out_k, torch.cat([expected_k, new_k], dim=2), atol=0, rtol=0)


def test_cache_shape_mismatch_is_an_error() -> None:
    cache = KVCache()
    cache.update(torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4))
    with pytest.raises(
        ValueError, match=r"new k must have shape \(B, H, T_new, Dh\) = \(2, 3, 4\)"
    ):
        cache.update(torch.randn(1, 3, 1, 4), torch.randn(2, 3, 1, 4))  # would broadcast silently
    with pytest.raises(ValueError, match=r"new v must have shape"):
        cache.update(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 5))


def test_cache_keeps_autograd_when_keys_need_grad() -> None:
    mha = MultiHeadAttention(15, 3)
    x = torch.randn(2, 4, 15)
    cache = KVCache()
    outs = [mha(x[:, t : t + 1], cache=cache)[0] for t in range(4)]
    torch.cat(outs, dim=1).sum().backward()  # the cat path: no in-place write into saved tensors
    assert mha.k_proj.weight.grad is not None and torch.isfinite(mha.k_proj.weight.grad).all()
    with torch.no_grad():
        full = mha(x, is_causal=True)[0]
    torch.testing.assert_close(torch.cat(outs, dim=1).detach(), full, atol=1e-6, rtol=1e-5)


def test_mha_decoding_with_buffered_cache_equals_full_pass() -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(21, 3).eval()
    x = torch.randn(2, 40, 21)
    with torch.no_grad():
        full = mha(x, is_causal=True)[0]
        cache = KVCache()
        steps = [mha(x[:, :5], is_causal=True, cache=cache)[0]]
        steps += [mha(x[:, t : t + 1], cache=cache)[0] for t in range(5, 40)]
    assert cache._buffers is not None  # the in-place path ran
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)
