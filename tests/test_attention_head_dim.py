"""MultiHeadAttention with an inner width independent of d_model (``head_dim=``, issue 25).

T5 v1.1 / Flan-T5 attention has ``num_heads * head_dim != d_model`` (Flan-T5-small: d_model 512,
6 heads of 64). Here: d_model 20, 3 heads of 8 (inner width 24), batch 2, 5 queries, 7 keys, and
a cross-attention with kdim 11 and vdim 13. The reference is the formula written out in float64
with PyTorch's ``F.scaled_dot_product_attention`` on the heads.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mtlib.attention import KVCache, MultiHeadAttention
from mtlib.positional import RotaryEmbedding

D, H, DH = 20, 3, 8  # inner width H * DH = 24 != D
B, TQ, TK = 2, 5, 7


def reference(
    mha: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: object
) -> torch.Tensor:
    """``out_proj(concat_h softmax(q_h k_h^T * scale) v_h)`` in float64, heads split by hand."""

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], H, DH).transpose(1, 2)  # (B, H, T, DH)

    p = {n: t.double() for n, t in mha.state_dict().items()}
    qh = split(F.linear(q.double(), p["q_proj.weight"], p.get("q_proj.bias")))
    kh = split(F.linear(k.double(), p["k_proj.weight"], p.get("k_proj.bias")))
    vh = split(F.linear(v.double(), p["v_proj.weight"], p.get("v_proj.bias")))
    if mha.rotary is not None:  # RoPE inside each head, positions from 0
        qh, kh = (mha.rotary.rotate(t, layout="BHTD").double() for t in (qh, kh))
    heads = F.scaled_dot_product_attention(qh, kh, vh, scale=mha.scale, **kw)  # (B, H, TQ, DH)
    merged = heads.transpose(1, 2).reshape(q.shape[0], q.shape[1], H * DH)  # (B, TQ, H * DH)
    return F.linear(merged, p["out_proj.weight"], p.get("out_proj.bias"))  # (B, TQ, D)


def test_projection_shapes_follow_head_dim() -> None:
    mha = MultiHeadAttention(D, H, head_dim=DH, kdim=11, vdim=13)
    assert (mha.head_dim, mha.inner_dim) == (DH, H * DH)
    shapes = {n: tuple(p.shape) for n, p in mha.named_parameters()}
    assert shapes == {
        "q_proj.weight": (24, 20), "q_proj.bias": (24,),
        "k_proj.weight": (24, 11), "k_proj.bias": (24,),
        "v_proj.weight": (24, 13), "v_proj.bias": (24,),
        "out_proj.weight": (20, 24), "out_proj.bias": (20,),
    }  # fmt: skip
    assert "head_dim=8" in repr(mha)
    # None is today's module: same shapes, same parameters from the same seed
    torch.manual_seed(0)
    default = MultiHeadAttention(24, 4)
    torch.manual_seed(0)
    explicit = MultiHeadAttention(24, 4, head_dim=6)
    assert default.head_dim == 6 and default.inner_dim == 24 and "head_dim" not in repr(default)
    for (name, a), (_, b) in zip(
        default.named_parameters(), explicit.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("fused", [True, False])
def test_cross_attention_equals_reference(fused: bool, bias: bool) -> None:
    torch.manual_seed(1)
    mha = MultiHeadAttention(D, H, head_dim=DH, kdim=11, vdim=13, bias=bias).eval()
    mha.fused = fused
    q, k, v = torch.randn(B, TQ, D), torch.randn(B, TK, 11), torch.randn(B, TK, 13)
    mask = torch.rand(B, 1, TQ, TK) > 0.3
    mask[..., 0] = True  # every query sees something
    out, weights = mha(q, k, v, mask=mask)
    assert out.shape == (B, TQ, D) and weights is None
    # the default scale is 1/sqrt(head_dim) = 1/sqrt(8), not 1/sqrt(d_model / num_heads)
    torch.testing.assert_close(
        out.double(), reference(mha, q, k, v, attn_mask=mask), atol=1e-5, rtol=0
    )


def test_need_weights_and_gradients() -> None:
    torch.manual_seed(2)
    mha = MultiHeadAttention(D, H, head_dim=DH, dropout=0.0).double()
    x = torch.randn(B, TQ, D, dtype=torch.float64, requires_grad=True)
    out, weights = mha(x, need_weights=True, average_attn_weights=False, is_causal=True)
    assert weights is not None and weights.shape == (B, H, TQ, TQ)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, TQ, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()  # causal
    torch.testing.assert_close(out, reference(mha, x, x, x, is_causal=True), atol=1e-12, rtol=0)
    fused = mha(x, is_causal=True)[0]  # the fused path agrees
    torch.testing.assert_close(fused, out, atol=1e-12, rtol=0)
    assert torch.autograd.gradcheck(lambda t: mha(t, is_causal=True)[0], (x,))


def test_kv_cache_with_head_dim() -> None:
    torch.manual_seed(3)
    mha = MultiHeadAttention(D, H, head_dim=DH).eval()
    x = torch.randn(B, 9, D)
    with torch.no_grad():
        full = mha(x, is_causal=True)[0]  # (B, 9, D)
        cache = KVCache()
        first = mha(x[:, :4], is_causal=True, cache=cache)[0]  # a chunk, then one at a time
        steps = [mha(x[:, t : t + 1], cache=cache)[0] for t in range(4, 9)]
        assert cache.k is not None and cache.k.shape == (B, H, 9, DH)
        torch.testing.assert_close(torch.cat([first, *steps], 1), full, atol=1e-6, rtol=0)
        memory = torch.randn(B, TK, D)  # a static (cross-attention) cache
        cross = KVCache(static=True)
        a = mha(x[:, :3], memory, cache=cross)[0]
        b = mha(x[:, 3:], memory, cache=cross)[0]
        torch.testing.assert_close(torch.cat([a, b], 1), mha(x, memory)[0], atol=1e-6, rtol=0)
        bad = KVCache()
        bad.update(torch.zeros(B, H, 2, D // H), torch.zeros(B, H, 2, D // H))  # d_model // H wide
        with pytest.raises(ValueError, match=r"cache\.k must have shape .*head_dim=8"):
            mha(x[:, :1], cache=bad)


def test_rotary_uses_head_dim() -> None:
    torch.manual_seed(4)
    mha = MultiHeadAttention(D, H, head_dim=DH, rotary=RotaryEmbedding(DH)).eval()
    x = torch.randn(B, TQ, D)
    out = mha(x, is_causal=True)[0]
    torch.testing.assert_close(
        out.double(), reference(mha, x, x, x, is_causal=True), atol=1e-5, rtol=0
    )
    mha.fused = False
    torch.testing.assert_close(mha(x, is_causal=True)[0], out, atol=1e-6, rtol=0)
    with pytest.raises(
        ValueError, match=r"rotary must be a RotaryEmbedding\(head_dim=10\) .*got head_dim=8"
    ):
        MultiHeadAttention(24, 3, head_dim=DH + 2, rotary=RotaryEmbedding(DH))
    with pytest.raises(ValueError, match=r"rotary must be a RotaryEmbedding\(head_dim=10\)"):
        MultiHeadAttention(D, 2, rotary=RotaryEmbedding(DH))  # default head_dim 20 // 2


def test_head_dim_validation() -> None:
    for bad, error in ((0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="head_dim must be"):
            MultiHeadAttention(D, H, head_dim=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"d_model=20 must be divisible by num_heads=3"):
        MultiHeadAttention(D, H)  # the old error when head_dim is not given
    assert MultiHeadAttention(D, H, head_dim=1).inner_dim == 3  # a narrow inner width is fine
    mha = MultiHeadAttention(D, H, head_dim=DH)
    with pytest.raises(ValueError, match=r"query must have shape \(batch, q_len, d_model=20\)"):
        mha(torch.randn(B, TQ, H * DH))  # the inner width is not the input width


def test_from_torch_keeps_default_width() -> None:
    torch.manual_seed(5)
    ref = torch.nn.MultiheadAttention(24, 4, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(ref).eval()
    assert (ours.head_dim, ours.inner_dim) == (6, 24)
    x = torch.randn(3, TQ, 24)
    torch.testing.assert_close(ours(x)[0], ref(x, x, x, need_weights=False)[0], atol=1e-6, rtol=0)
