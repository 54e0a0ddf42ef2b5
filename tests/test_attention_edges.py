"""Attention at the edges (issue 25, items 1, 5 and 6): half precision in the explicit path,
2-D masks that could be padding masks, and what the mask docstrings promise.

Sizes are distinct (batch != q_len != k_len, d_model != kdim != vdim) except where the batch
size must equal q_len: that is the ambiguous case of item 5.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from mtlib import masks
from mtlib.attention import (
    AdditiveAttention,
    KVCache,
    MultiHeadAttention,
    scaled_dot_product_attention,
    tiled_attention,
)
from mtlib.blocks import BlockConfig, EncoderBlock

HALF = [torch.float16, torch.bfloat16]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- 1. float16 / bfloat16 in the explicit path ---------------------------------------------


def _overflowing_qkv() -> tuple[Tensor, Tensor, Tensor]:
    """float64 q, k, v with entries of std 24 and d_k = 128 whose raw scores pass 65504.

    The first 6 keys are the queries plus a little noise (a token attending to itself), so
    ``q . k`` is about ``24**2 * 128 = 73728`` before the scaling by ``1 / sqrt(128)``.
    """
    g = _gen(0)
    q = torch.randn(2, 3, 6, 128, generator=g, dtype=torch.float64) * 24  # (B, H, Tq, d_k)
    near = q + 0.1 * torch.randn(q.shape, generator=g, dtype=torch.float64)
    far = torch.randn(2, 3, 3, 128, generator=g, dtype=torch.float64) * 24
    k = torch.cat([near, far], dim=2)  # (B, H, Tk=9, d_k)
    v = torch.randn(2, 3, 9, 40, generator=g, dtype=torch.float64)  # (B, H, Tk, d_v)
    return q, k, v


def test_float16_scores_past_65504_do_not_overflow() -> None:
    q, k, v = _overflowing_qkv()
    assert (q.half().double() @ k.half().double().transpose(-2, -1)).abs().max() > 65504
    ref, ref_w = scaled_dot_product_attention(q, k, v, return_weights=True)  # float64
    half = [t.half() for t in (q, k, v)]
    out, weights = scaled_dot_product_attention(*half, return_weights=True)
    assert out.dtype == weights.dtype == torch.float16  # returned in the inputs' dtype
    assert bool(out.isfinite().all()) and bool(weights.isfinite().all())  # was NaN
    torch.testing.assert_close(out.double(), ref, atol=2e-3, rtol=0)
    torch.testing.assert_close(weights.double(), ref_w, atol=1e-3, rtol=0)
    theirs = F.scaled_dot_product_attention(*half)
    torch.testing.assert_close(out, theirs, atol=2e-3, rtol=0)


def test_float16_overflow_with_mask_bias_and_is_causal() -> None:
    q, k, v = _overflowing_qkv()
    mask = masks.padding_mask(torch.tensor([9, 7]), 9)  # (B, 1, 1, Tk)
    bias = torch.randn(1, 3, 6, 9, generator=_gen(1), dtype=torch.float64)  # (1, H, Tq, Tk)
    kwargs = dict(mask=mask, bias=bias, is_causal=True)
    ref = scaled_dot_product_attention(q, k, v, **kwargs)
    half = [t.half() for t in (q, k, v)]
    out = scaled_dot_product_attention(*half, **{**kwargs, "bias": bias.half()})
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.double(), ref, atol=2e-3, rtol=0)


@pytest.mark.parametrize("dtype", HALF)
def test_multi_head_need_weights_in_half_precision_matches_the_fused_path(
    dtype: torch.dtype,
) -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(128, 4, kdim=48, vdim=40).to(dtype)
    g = _gen(3)
    query = (torch.randn(3, 10, 128, generator=g) * 100).to(dtype)  # (B, Tq, d_model)
    key = (torch.randn(3, 12, 48, generator=g) * 100).to(dtype)  # (B, Tk, kdim)
    value = (torch.randn(3, 12, 40, generator=g) * 100).to(dtype)  # (B, Tk, vdim)
    explicit, weights = mha(query, key, value, need_weights=True, average_attn_weights=False)
    fused, none = mha(query, key, value)
    assert none is None and weights is not None
    assert explicit.dtype == weights.dtype == dtype
    assert bool(explicit.isfinite().all()) and bool(fused.isfinite().all())  # float16 was NaN
    scale = float(fused.detach().float().abs().max())  # about 140
    torch.testing.assert_close(explicit.float(), fused.float(), atol=2e-2 * scale, rtol=0)
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(3, 4, 10), atol=2e-2, rtol=0)
    # and both agree with the float64 computation of the same (rounded) weights and inputs
    mha64 = MultiHeadAttention(128, 4, kdim=48, vdim=40).double()
    mha64.load_state_dict({n: p.double() for n, p in mha.state_dict().items()})
    ref, _ = mha64(query.double(), key.double(), value.double())
    torch.testing.assert_close(explicit.double(), ref, atol=2e-2 * scale, rtol=0)


def _half_errors(dtype: torch.dtype, seed: int) -> tuple[float, float]:
    """Largest error of mtlib's and PyTorch's attention in ``dtype`` vs float64 (causal)."""
    g = _gen(seed)
    q, k, v = (
        torch.randn(4, 4, 33, 64, generator=g, dtype=torch.float64) * s for s in (1.5, 1.5, 1)
    )
    low = [t.to(dtype) for t in (q, k, v)]
    # the reference sees the same rounded inputs: what is measured is the computation's error
    ref = scaled_dot_product_attention(*(t.double() for t in low), is_causal=True)
    ours = scaled_dot_product_attention(*low, is_causal=True)
    theirs = F.scaled_dot_product_attention(*low, is_causal=True)
    assert ours.dtype == theirs.dtype == dtype
    return float((ours.double() - ref).abs().max()), float((theirs.double() - ref).abs().max())


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_half_precision_error_no_worse_than_pytorch(dtype: torch.dtype, seed: int) -> None:
    ours, theirs = _half_errors(dtype, seed)
    # before: bfloat16 0.026 / 0.019 / 0.021 vs PyTorch's 0.0094 / 0.0102 / 0.0078
    assert ours <= 1.05 * theirs, (ours, theirs)


# --- 5. a (B, T_k) padding mask passed where a 2-D (T_q, T_k) mask is read ------------------

BQ, TK5, D5, KDIM5, VDIM5, H5 = 4, 6, 12, 10, 9, 3  # batch == q_len == 4: the ambiguous case


def _mha5() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(D5, H5, kdim=KDIM5, vdim=VDIM5).eval()


def _inputs5(batch: int = BQ, q_len: int = BQ) -> tuple[Tensor, Tensor, Tensor]:
    g = _gen(5)
    return (
        torch.randn(batch, q_len, D5, generator=g),
        torch.randn(batch, TK5, KDIM5, generator=g),
        torch.randn(batch, TK5, VDIM5, generator=g),
    )


PADDING = masks.padding_mask(torch.tensor([6, 4, 2, 5]), TK5)[:, 0, 0]  # (B=4, Tk=6), unequal rows
AMBIGUOUS = (
    r"mask of shape \(4, 6\) is ambiguous: a 2-D mask means \(q_len, k_len\), the same for every "
    r"sequence, but here batch = q_len = 4, so it may be a \(batch, k_len\) padding mask: "
    r"build it with masks\.padding_mask\(lengths\) or mask\[:, None, None, :\], shape "
    r"\(batch, 1, 1, k_len\); for a mask shared by every sequence write mask\[None, None\], "
    r"shape \(1, 1, q_len, k_len\)"
)


@pytest.mark.parametrize("fused", [True, False])
def test_padding_mask_as_2d_mask_with_batch_equal_q_len_is_refused(fused: bool) -> None:
    mha = _mha5()
    mha.fused = fused
    query, key, value = _inputs5()
    with pytest.raises(ValueError, match=AMBIGUOUS):
        mha(query, key, value, mask=PADDING)  # was accepted and read as (Tq, Tk): off by 0.77
    right, _ = mha(query, key, value, mask=PADDING[:, None, None, :])  # what was meant
    torch.testing.assert_close(
        right, mha(query, key, value, mask=masks.padding_mask(torch.tensor([6, 4, 2, 5])))[0]
    )


def test_ambiguous_2d_mask_refused_everywhere_a_2d_mask_meets_batched_scores() -> None:
    query, key, value = _inputs5()
    q = torch.randn(BQ, H5, BQ, 5, generator=_gen(6))  # (B, H, Tq, d_k)
    k = torch.randn(BQ, H5, TK5, 5, generator=_gen(7))
    with pytest.raises(ValueError, match=AMBIGUOUS):
        scaled_dot_product_attention(q, k, k, mask=PADDING)
    with pytest.raises(ValueError, match=r"ambiguous.*\(batch, 1, k_len\): mask\[:, None, :\].*"
                       r"mask\[None\], shape \(1, q_len, k_len\)"):  # fmt: skip
        scaled_dot_product_attention(q[:, 0], k[:, 0], k[:, 0], mask=PADDING)  # (B, Tq, d_k)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 6\) is ambiguous"):
        AdditiveAttention(D5, KDIM5, 7)(query, key, value, mask=PADDING)
    block = EncoderBlock(BlockConfig(d_model=D5, num_heads=H5, d_ff=16, dropout=0.0))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) is ambiguous"):
        block(query, mask=PADDING[:, :BQ])  # (B, T) padding of a self-attention block


def test_padding_shaped_2d_mask_with_batch_not_q_len_points_to_padding_mask() -> None:
    mha = _mha5()
    query, key, value = _inputs5(batch=3, q_len=5)
    with pytest.raises(
        ValueError,
        match=r"mask must be broadcastable to \(batch=3, heads=3, q_len=5, k_len=6\), got \(3, 6\)\. "
        r"It looks like a \(batch, k_len\) padding mask: build it with masks\.padding_mask\(lengths\)",
    ):
        mha(query, key, value, mask=PADDING[:3])


def _reference(
    mha: MultiHeadAttention, query: Tensor, key: Tensor, value: Tensor, mask: Tensor
) -> Tensor:
    """The same attention through PyTorch's kernel, the mask broadcast as PyTorch does."""

    def split(x: Tensor) -> Tensor:
        return x.view(x.shape[0], x.shape[1], H5, D5 // H5).transpose(1, 2)  # (B, H, T, Dh)

    q, k, v = split(mha.q_proj(query)), split(mha.k_proj(key)), split(mha.v_proj(value))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, Tq, Dh)
    return mha.out_proj(out.transpose(1, 2).reshape(query.shape[0], -1, D5))


@pytest.mark.parametrize("fused", [True, False])
def test_2d_masks_that_read_the_same_either_way_are_accepted(fused: bool) -> None:
    mha = _mha5()
    mha.fused = fused
    query, key, value = _inputs5()
    causal = masks.causal_mask(BQ, TK5)  # (4, 6): the common case, queries the last positions
    shared = PADDING[1].expand(BQ, TK5)  # equal rows: (Tq, Tk) and (B, Tk) readings agree
    table = torch.rand(BQ, TK5, generator=_gen(8)) < 0.6
    table[:, 0] = True
    with torch.no_grad():
        for mask in (causal, shared):
            got, _ = mha(query, key, value, mask=mask, need_weights=not fused)
            torch.testing.assert_close(got, _reference(mha, query, key, value, mask))
            torch.testing.assert_close(got, mha(query, key, value, mask=mask[None, None])[0])
        per_sequence = shared[:, None, None, :]  # the (B, Tk) reading: (B, 1, 1, Tk)
        got, _ = mha(query, key, value, mask=shared)
        torch.testing.assert_close(got, _reference(mha, query, key, value, per_sequence))
        # any mask shared by every sequence, written unambiguously as (1, 1, Tq, Tk)
        got, _ = mha(query, key, value, mask=table[None, None], need_weights=not fused)
        torch.testing.assert_close(got, _reference(mha, query, key, value, table))
        with pytest.raises(ValueError, match="ambiguous"):
            mha(query, key, value, mask=table)


def test_2d_mask_combined_with_is_causal_on_the_explicit_path() -> None:
    # is_causal turns an equal-rows 2-D mask into one with unequal rows; the explicit path
    # must not then refuse it as ambiguous
    torch.manual_seed(0)
    mha = MultiHeadAttention(D5, H5).eval()
    x = torch.randn(BQ, BQ, D5, generator=_gen(9))  # (B=4, T=4, d_model)
    keys = torch.tensor([True, False, True, True]).expand(BQ, BQ)  # (T, T), equal rows
    with torch.no_grad():
        explicit, w = mha(x, mask=keys, is_causal=True, need_weights=True)
        fused, _ = mha(x, mask=keys, is_causal=True)
        ref = _reference(mha, x, x, x, keys & masks.causal_mask(BQ))
    assert w is not None
    torch.testing.assert_close(explicit, fused)
    torch.testing.assert_close(explicit, ref)


def test_check_mask_ambiguity_rule() -> None:
    check = masks.check_mask
    check(PADDING, 4, 6, batch_shape=(5, 3))  # batch != q_len: (Tq, Tk), not ambiguous
    check(PADDING, 4, 6)  # batch unknown
    check(PADDING[:1].expand(4, 6), 4, 6, batch_shape=(4, 3))
    check(masks.causal_mask(4, 6), 4, 6, batch_shape=(4, 3))
    check(masks.causal_mask(1, 6), 1, 6, batch_shape=(1, 3))
    with pytest.raises(ValueError, match="ambiguous"):
        check(PADDING, 4, 6, batch_shape=(4, 3))
    with pytest.raises(ValueError, match="ambiguous"):  # a causal mask of another alignment
        check(torch.ones(4, 6, dtype=torch.bool).tril(), 4, 6, batch_shape=(4, 3))


# --- 6. what the docstrings promise -----------------------------------------------------------


def test_1d_mask_is_refused_with_the_2d_spelling() -> None:
    mha = _mha5()
    query, key, value = _inputs5(batch=3, q_len=5)
    keys = torch.tensor([True, True, False, True, True, False])  # (Tk,)
    hint = (
        r"got \(6,\)\. A 1-D mask is refused \(keys of which sequence\?\): for the same keys for "
        r"every query and sequence write mask\[None, :\], shape \(1, k_len\)"
    )
    with pytest.raises(ValueError, match=hint):
        mha(query, key, value, mask=keys)
    q, k = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 6, 4)
    with pytest.raises(ValueError, match=hint):
        scaled_dot_product_attention(q, k, k, mask=keys)
    # the suggested spelling: the same keys for every query (F.sdpa of torch 2.13 refuses a
    # 1-D attn_mask too, with an IndexError)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, k, mask=keys[None, :]),
        F.scaled_dot_product_attention(q, k, k, attn_mask=keys.expand(5, 6)),
    )


def test_is_causal_with_more_queries_than_keys_is_refused_clearly() -> None:
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 3, 4)  # Tq = 5 > Tk = 3
    with pytest.raises(
        ValueError,
        match=r"is_causal needs at least as many keys as queries \(the queries are the last "
        r"positions\), got q_len=5, k_len=3\. PyTorch's is_causal .*\.tril\(\)",
    ):
        scaled_dot_product_attention(q, k, k, is_causal=True)
    top_left = torch.ones(5, 3, dtype=torch.bool).tril()  # the suggested spelling
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, k, mask=top_left),
        F.scaled_dot_product_attention(q, k, k, is_causal=True),
    )
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"is_causal needs at least as many keys as queries"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 3, 8), is_causal=True)


def test_tiled_causal_with_more_queries_than_keys_gives_zeros_to_the_first_queries() -> None:
    q, k, v = torch.randn(2, 7, 4), torch.randn(2, 4, 4), torch.randn(2, 4, 3)
    out = tiled_attention(q, k, v, causal=True, block_size=2)  # (2, 7, 3)
    assert torch.equal(out[:, :3], torch.zeros(2, 3, 3))  # queries 0..2 see no key
    allowed = torch.ones(7, 4, dtype=torch.bool).tril(diagonal=-3)  # j <= i + Tk - Tq
    torch.testing.assert_close(
        out[:, 3:], F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)[:, 3:]
    )


def test_empty_rows_zero_for_data_masks_and_bias_refused_for_shared_masks() -> None:
    # "a query with nothing to attend to gets a zero output": with a mask from the data or a
    # -inf bias; a 2-D (shared) mask with an empty row raises, even on a batch of one
    q, k, v = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5), torch.randn(2, 3, 6, 7)
    table = torch.ones(4, 6, dtype=torch.bool)
    table[2] = False  # query 2 sees nothing
    for batch in (1, 2):
        with pytest.raises(ValueError, match="lets query 2 attend to no key in every sequence"):
            scaled_dot_product_attention(q[:batch], k[:batch], v[:batch], mask=table)
    data = table.expand(2, 1, 4, 6)  # the batch dimension of the scores: accepted
    out = scaled_dot_product_attention(q, k, v, mask=data)
    assert torch.equal(out[:, :, 2], torch.zeros(2, 3, 7))
    bias = masks.to_additive(table)  # -inf bias, (4, 6)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, bias=bias), out)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=table | ~table.any(-1, keepdim=True))
    torch.testing.assert_close(out[:, :, [0, 1, 3]], ref[:, :, [0, 1, 3]])
    mha = MultiHeadAttention(15, 3, kdim=11, vdim=9)
    x, kv, vv = torch.randn(2, 4, 15), torch.randn(2, 6, 11), torch.randn(2, 6, 9)
    for fused in (True, False):
        mha.fused = fused
        y, _ = mha(x, kv, vv, mask=data, need_weights=not fused)
        torch.testing.assert_close(y[:, 2], mha.out_proj.bias.expand(2, 15))
        with pytest.raises(ValueError, match="attend to no key in every sequence"):
            mha(x, kv, vv, mask=table)


def test_bias_with_one_key_is_refused_when_there_are_more_keys() -> None:
    # chapter 6's decoding bug, in its bias form: alibi_bias(H, 1) or rpb(1) inside a cached
    # decoder is (1, H, 1, 1), broadcasts over every key and cancels in the softmax (no positions)
    from mtlib.positional import RelativePositionBias, alibi_bias

    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, 5, 16)
    for one_key in (alibi_bias(4, 1), RelativePositionBias(4, bidirectional=False)(1)):
        assert one_key.shape == (1, 4, 1, 1)
        with pytest.raises(ValueError, match="key dimension 1 but there are k_len=5 keys"):
            mha(x, bias=one_key.detach(), is_causal=True)
        cache = KVCache()
        mha(x[:, :3], cache=cache, bias=alibi_bias(4, 3))  # the prompt, bias for its 3 keys
        with pytest.raises(ValueError, match="key dimension 1 but there are k_len=4 keys"):
            mha(x[:, 3:4], cache=cache, bias=one_key.detach())  # one step, 4 keys
        q = torch.randn(1, 4, 5, 8)
        with pytest.raises(ValueError, match="key dimension 1"):
            scaled_dot_product_attention(q, q, q, bias=one_key.detach())
    # the right per-step bias (every key) is accepted and equals the full pass
    cache = KVCache()
    steps = [mha(x[:, t : t + 1], cache=cache, bias=alibi_bias(4, 1, t + 1))[0] for t in range(5)]
    full = mha(x, bias=alibi_bias(4, 5), is_causal=True)[0]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    # one key and one query-independent value: still fine (nothing to broadcast over)
    mha(x[:, :1], bias=alibi_bias(4, 1))
