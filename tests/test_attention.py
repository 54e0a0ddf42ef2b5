"""Tests of mtlib.attention: parity with PyTorch, properties, masks, KV cache, bad input.

Sizes are distinct on purpose (batch != q_len != k_len != d_model != kdim != vdim, odd head
counts) so that a transposed dimension cannot go unnoticed.
"""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from mtlib import masks
from mtlib.attention import (
    AdditiveAttention,
    KVCache,
    MultiHeadAttention,
    masked_softmax,
    scaled_dot_product_attention,
)
from mtlib.positional import RotaryEmbedding
from tests.helpers import close

B, TQ, TK, D, H = 2, 5, 7, 15, 3  # batch, query length, key length, d_model, heads (d_head 5)
KDIM, VDIM = 11, 6
DTYPES = [torch.float32, torch.float64]


def random_bool_mask(*shape: int) -> Tensor:
    """A random mask with at least one allowed key per row (PyTorch gives NaN otherwise)."""
    mask = torch.rand(*shape) < 0.6
    mask[..., 0] = True
    return mask


def pair(
    dtype: torch.dtype = torch.float32, **kwargs: object
) -> tuple[nn.MultiheadAttention, MultiHeadAttention]:
    """A random nn.MultiheadAttention and our copy of it, both in eval mode."""
    ref = nn.MultiheadAttention(
        kwargs.pop("d_model", D), kwargs.pop("heads", H), batch_first=True, **kwargs
    )
    ref = ref.to(dtype).eval()
    with torch.no_grad():  # PyTorch initialises biases to zero: make them visible
        for name, p in ref.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    return ref, MultiHeadAttention.from_torch(ref).eval()


# --- scaled_dot_product_attention -----------------------------------------------------------


def _sdpa_masks() -> dict[str, tuple[Tensor | None, Tensor | None]]:
    """(mask, bias) pairs: 0.2 takes bool masks in mask= and float biases in bias=."""
    causal = masks.causal_mask(TQ, TK)
    bias = torch.randn(1, H, TQ, TK)
    return {
        "none": (None, None),
        "bool": (random_bool_mask(B, H, TQ, TK), None),
        "bool_broadcast": (random_bool_mask(B, 1, 1, TK), None),
        "causal": (causal, None),
        "float_bias": (None, bias.masked_fill(~causal, float("-inf"))),
        "mask_and_bias": (random_bool_mask(B, 1, 1, TK), bias),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_kind", list(_sdpa_masks()))
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa_matches_torch(dtype: torch.dtype, mask_kind: str, scale: float | None) -> None:
    q = torch.randn(B, H, TQ, 4, dtype=dtype)
    k = torch.randn(B, H, TK, 4, dtype=dtype)
    v = torch.randn(B, H, TK, 6, dtype=dtype)
    mask, bias = _sdpa_masks()[mask_kind]
    bias = None if bias is None else bias.to(dtype)
    # PyTorch takes one attn_mask: the bias with the masked keys set to -inf
    attn_mask = (
        mask if bias is None else bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    )
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)
    out, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, bias=bias, scale=scale, return_weights=True
    )
    assert out.shape == (B, H, TQ, 6) and weights.shape == (B, H, TQ, TK)
    close(out, expected)
    close(weights.sum(-1), torch.ones(B, H, TQ, dtype=dtype))


def test_sdpa_square_causal_matches_torch_is_causal() -> None:
    q, k, v = torch.randn(3, B, TK, 4, dtype=torch.float64)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    close(scaled_dot_product_attention(q, k, v, mask=masks.causal_mask(TK)), expected)
    close(scaled_dot_product_attention(q, k, v, is_causal=True), expected)


def test_sdpa_is_causal_is_bottom_right_aligned_and_combines_with_mask() -> None:
    q = torch.randn(B, H, TQ, 4, dtype=torch.float64)
    k, v = (
        torch.randn(B, H, TK, 4, dtype=torch.float64),
        torch.randn(B, H, TK, 6, dtype=torch.float64),
    )
    causal = scaled_dot_product_attention(q, k, v, is_causal=True)
    # queries are the last TQ positions, as masks.causal_mask(TQ, TK)
    close(causal, scaled_dot_product_attention(q, k, v, mask=masks.causal_mask(TQ, TK)))
    # ...which is not PyTorch's top-left alignment when TQ < TK
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(causal, top_left)
    pad = masks.padding_mask(torch.tensor([TK, 4]), TK)  # (B, 1, 1, TK)
    bias = torch.randn(1, H, TQ, TK, dtype=torch.float64)
    close(
        scaled_dot_product_attention(q, k, v, mask=pad, bias=bias, is_causal=True),
        scaled_dot_product_attention(
            q, k, v, mask=masks.combine(pad, masks.causal_mask(TQ, TK)), bias=bias
        ),
    )


def test_sdpa_without_heads_and_with_3d_mask() -> None:
    q, k, v = torch.randn(B, TQ, 4), torch.randn(B, TK, 4), torch.randn(B, TK, 3)
    mask = random_bool_mask(B, TQ, TK)
    close(
        scaled_dot_product_attention(q, k, v, mask=mask),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
    )


def test_sdpa_default_scale_is_inverse_sqrt_dk() -> None:
    q, k, v = torch.randn(B, TQ, 9), torch.randn(B, TK, 9), torch.randn(B, TK, 2)
    close(scaled_dot_product_attention(q, k, v), scaled_dot_product_attention(q, k, v, scale=1 / 3))


def test_masked_keys_get_exactly_zero_weight() -> None:
    scores = torch.randn(B, TQ, TK) * 50  # large scores: -1e9 style masking would still be fine,
    mask = random_bool_mask(B, TQ, TK)  # but only -inf gives exactly zero
    weights = masked_softmax(scores, mask=mask)
    assert (weights[~mask.expand_as(weights)] == 0).all()
    close(weights.sum(-1), torch.ones(B, TQ))
    close(masked_softmax(scores), scores.softmax(-1))
    # the same through bias=, alone or on top of the mask
    bias = torch.randn(TQ, TK)
    close(masked_softmax(scores, bias=masks.to_additive(mask)), weights)
    with_bias = masked_softmax(scores, mask=mask, bias=bias)
    assert (with_bias[~mask.expand_as(weights)] == 0).all()
    close(with_bias, masked_softmax(scores + bias, mask=mask))


@pytest.mark.parametrize("fused", [False, True])
def test_masked_keys_lose_even_to_a_score_below_minus_1e9(fused: bool) -> None:
    """Masked scores are -inf, not a large negative number: with a bias of -1e10 on every key
    and one allowed key per query, a -1e9 fill would hand the masked keys all the weight."""
    allowed = torch.tensor([(2 * i + 1) % TK for i in range(TQ)])  # one key per query
    mask = torch.zeros(TQ, TK, dtype=torch.bool)
    mask[torch.arange(TQ), allowed] = True
    bias = torch.full((TQ, TK), -1e10)
    q, k, v = torch.randn(B, H, TQ, 4), torch.randn(B, H, TK, 4), torch.randn(B, H, TK, 6)
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, return_weights=True)
    assert torch.equal(weights, mask.float().expand(B, H, TQ, TK))  # exactly one-hot
    close(out, v[:, :, allowed])
    mha = MultiHeadAttention(D, H)
    mha.fused = fused
    x = torch.randn(B, TK, D)
    expected = mha.out_proj(mha.v_proj(x)[:, allowed])  # each query copies its key's value
    close(mha(x[:, :TQ], x, mask=mask, bias=bias)[0], expected)


@pytest.mark.parametrize("kind", ["bool", "float", "both"])
def test_sdpa_fully_masked_row_gives_zeros_and_finite_grads(kind: str) -> None:
    q = torch.randn(B, H, TQ, 4, requires_grad=True)
    k = torch.randn(B, H, TK, 4, requires_grad=True)
    v = torch.randn(B, H, TK, 6, requires_grad=True)
    mask = random_bool_mask(B, 1, TQ, TK)
    mask[0, :, 2] = False  # query 2 of batch 0 has nothing to attend to
    noise = torch.randn(TQ, TK)
    kwargs = {
        "bool": {"mask": mask},
        "float": {"bias": masks.to_additive(mask) + noise},
        "both": {"mask": mask, "bias": noise},
    }[kind]
    out, weights = scaled_dot_product_attention(q, k, v, **kwargs, return_weights=True)
    assert torch.equal(out[0, :, 2], torch.zeros(H, 6))
    assert torch.equal(weights[0, :, 2], torch.zeros(H, TK))
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    (out.square().sum() + weights.square().sum()).backward()
    for x in (q, k, v):
        assert torch.isfinite(x.grad).all()
    assert torch.equal(q.grad[0, :, 2], torch.zeros(H, 4))  # the empty row depends on nothing


def test_sdpa_gradcheck_with_mask_and_empty_row() -> None:
    q = torch.randn(B, 2, 3, 2, dtype=torch.float64, requires_grad=True)
    k = torch.randn(B, 2, 4, 2, dtype=torch.float64, requires_grad=True)
    v = torch.randn(B, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    mask = random_bool_mask(B, 1, 3, 4)
    mask[1, 0, 1] = False  # an empty row
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask), (q, k, v)
    )
    bias = torch.randn(1, 2, 3, 4, dtype=torch.float64).masked_fill(~mask[:1], float("-inf"))
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, bias=bias), (q, k, v), fast_mode=True
    )
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask, bias=bias.clamp(min=-5)),
        (q, k, v),
        fast_mode=True,
    )


def test_attention_arguments_after_the_tensors_are_keyword_only() -> None:
    q, k, v = torch.randn(B, TQ, 4), torch.randn(B, TK, 4), torch.randn(B, TK, 3)
    mask = random_bool_mask(B, TQ, TK)
    with pytest.raises(TypeError, match=r"positional argument"):
        scaled_dot_product_attention(q, k, v, mask)  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"positional argument"):
        masked_softmax(q @ k.transpose(-1, -2), mask)  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"positional argument"):
        MultiHeadAttention(D, H, KDIM)  # type: ignore[misc]
    mha = MultiHeadAttention(D, H)
    x = torch.randn(B, TQ, D)
    with pytest.raises(TypeError, match=r"positional argument"):
        mha(x, x, x, masks.causal_mask(TQ))  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"average_weights"):  # renamed average_attn_weights
        mha(x, need_weights=True, average_weights=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"positional argument"):
        AdditiveAttention(4, 6, 8, 0.1)  # type: ignore[misc]


def test_sdpa_dropout() -> None:
    q, k, v = torch.randn(B, TQ, 4), torch.randn(B, TK, 4), torch.randn(B, TK, 3)
    _, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5, return_weights=True)
    dropped = weights == 0
    assert dropped.any() and not dropped.all()
    _, no_dropout = scaled_dot_product_attention(q, k, v, return_weights=True)
    kept = no_dropout * 2  # survivors are scaled by 1 / (1 - p)
    close(weights[~dropped], kept[~dropped])


# --- MultiHeadAttention vs nn.MultiheadAttention -------------------------------------------


MHA_CASES = {
    "self": {},
    "cross": {"cross": True},
    "kdim_vdim": {"cross": True, "kdim": KDIM, "vdim": VDIM},
    "no_bias": {"cross": True, "bias": False},
    "no_bias_kdim": {"cross": True, "kdim": KDIM, "vdim": VDIM, "bias": False},
    "five_heads": {"d_model": 20, "heads": 5},
}


def _inputs(case: dict, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    d_model = case.get("d_model", D)
    query = torch.randn(B, TQ, d_model, dtype=dtype)
    if not case.get("cross"):
        return query, query, query
    key = torch.randn(B, TK, case.get("kdim", d_model), dtype=dtype)
    return query, key, torch.randn(B, TK, case.get("vdim", d_model), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(MHA_CASES))
@pytest.mark.parametrize("fused", [True, False])
def test_mha_matches_torch(dtype: torch.dtype, case: str, fused: bool) -> None:
    opts = MHA_CASES[case]
    ref, ours = pair(dtype, **{k: v for k, v in opts.items() if k != "cross"})
    ours.fused = fused
    query, key, value = _inputs(opts, dtype)
    expected, expected_w = ref(query, key, value)  # averaged weights
    out, weights = ours(query, key, value, need_weights=True)
    close(out, expected)
    close(weights, expected_w)
    assert weights.shape == (B, TQ, key.shape[1])
    _, per_head = ours(query, key, value, need_weights=True, average_attn_weights=False)
    close(per_head, ref(query, key, value, average_attn_weights=False)[1])
    assert per_head.shape == (B, ref.num_heads, TQ, key.shape[1])
    with torch.no_grad():  # PyTorch's own fast path, where it applies
        out_no_w, none = ours(query, key, value)
        close(out_no_w, ref(query, key, value, need_weights=False)[0])
    assert none is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(
    "mask_kind", ["key_padding", "attn_bool", "attn_float", "attn_3d", "both", "float_and_padding"]
)
def test_mha_masks_match_torch(dtype: torch.dtype, fused: bool, mask_kind: str) -> None:
    ref, ours = pair(dtype, kdim=KDIM, vdim=VDIM)
    ours.fused = fused
    query, key, value = _inputs({"cross": True, "kdim": KDIM, "vdim": VDIM}, dtype)
    kpm = torch.arange(TK) >= torch.tensor([TK, 3])[:, None]  # (B, TK), True = padding
    ignore_2d = ~random_bool_mask(TQ, TK)
    float_attn = torch.randn(TQ, TK, dtype=dtype)
    kwargs = {
        "key_padding": {"key_padding_mask": kpm},
        "attn_bool": {"attn_mask": ignore_2d},
        "attn_float": {"attn_mask": float_attn},
        "attn_3d": {"attn_mask": ~random_bool_mask(B * H, TQ, TK)},
        "both": {"attn_mask": ignore_2d, "key_padding_mask": kpm},
        "float_and_padding": {"attn_mask": float_attn, "key_padding_mask": kpm},
    }[mask_kind]
    # 0.2: PyTorch's bool masks are converted to mask=, its float attn_mask goes in bias=
    attn_mask = kwargs.get("attn_mask")
    is_bias = attn_mask is not None and attn_mask.is_floating_point()
    mask = masks.combine(
        masks.from_key_padding_mask(kpm) if "key_padding_mask" in kwargs else None,
        masks.from_attn_mask(attn_mask, num_heads=H)
        if attn_mask is not None and not is_bias
        else None,
    )
    bias = attn_mask if is_bias else None
    if is_bias and "key_padding_mask" in kwargs:  # PyTorch wants both of the same kind
        kwargs["key_padding_mask"] = torch.zeros(B, TK, dtype=dtype).masked_fill(kpm, float("-inf"))
    expected, expected_w = ref(query, key, value, average_attn_weights=False, **kwargs)
    out, weights = ours(
        query, key, value, mask=mask, bias=bias, need_weights=True, average_attn_weights=False
    )
    close(out, expected)
    close(weights, expected_w)
    close(ours(query, key, value, mask=mask, bias=bias)[0], expected)
    if is_bias:  # a float mask is refused, with the way to pass it
        with pytest.raises(TypeError, match=r"mask must be a bool Tensor.*bias="):
            ours(query, key, value, mask=attn_mask)


def test_from_torch_copies_dtype_dropout_and_checks_support() -> None:
    ref = nn.MultiheadAttention(D, H, dropout=0.25, batch_first=True, kdim=KDIM).double()
    ours = MultiHeadAttention.from_torch(ref)
    assert ours.dropout == 0.25 and ours.kdim == KDIM and ours.vdim == D
    assert ours.q_proj.weight.dtype == torch.float64
    with pytest.raises(TypeError, match=r"m must be an nn.MultiheadAttention, got Linear"):
        MultiHeadAttention.from_torch(nn.Linear(3, 3))
    with pytest.raises(ValueError, match=r"add_bias_kv or add_zero_attn"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(D, H, add_bias_kv=True))


def test_from_torch_shape_check(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = nn.MultiheadAttention(D, H, batch_first=True)
    ref.out_proj.weight = nn.Parameter(torch.randn(D, D + 1))  # a corrupted reference
    with pytest.raises(
        ValueError,
        match=r"shape mismatch copying out_proj.weight into out_proj.weight: theirs \(15, 16\), ours \(15, 15\)",
    ):
        MultiHeadAttention.from_torch(ref)



@pytest.mark.parametrize("training", [False, True])
def test_from_torch_keeps_the_training_mode(training: bool) -> None:
    # issue 25: an eval-mode source with dropout used to give a train-mode copy (off by 1.32)
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(D, H, dropout=0.3, kdim=KDIM, vdim=VDIM, batch_first=True)
    ref.train(training)
    ours = MultiHeadAttention.from_torch(ref)
    assert ours.training is training
    query, key, value = torch.randn(B, TQ, D), torch.randn(B, TK, KDIM), torch.randn(B, TK, VDIM)
    for fused in (True, False):
        ours.fused = fused
        if training:  # dropout on: two calls differ, as PyTorch's do
            assert not torch.allclose(ours(query, key, value)[0], ours(query, key, value)[0])
        else:  # the same function as the source, dropout off
            close(ours(query, key, value, need_weights=not fused)[0], ref(query, key, value)[0])


def test_from_torch_refuses_sequence_first_and_the_advice_works() -> None:
    # issue 25: a batch_first=False copy silently took (T, B, E) input (wrong by 0.91)
    ref = nn.MultiheadAttention(D, H, kdim=KDIM, vdim=VDIM).eval()  # batch_first=False
    with pytest.raises(ValueError, match=r"m has batch_first=False.*\(T, B, E\).*batch_first=True.*transpose"):
        MultiHeadAttention.from_torch(ref)
    # what the message says to do: same parameters in a batch_first=True module, inputs transposed
    twin = nn.MultiheadAttention(D, H, kdim=KDIM, vdim=VDIM, batch_first=True).eval()
    twin.load_state_dict(ref.state_dict())
    ours = MultiHeadAttention.from_torch(twin)
    query, key = torch.randn(TQ, B, D), torch.randn(TK, B, KDIM)  # (T, B, E), PyTorch's default
    value = torch.randn(TK, B, VDIM)
    expected = ref(query, key, value)[0]  # (TQ, B, D)
    out = ours(query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1))[0]  # (B, TQ, D)
    close(out.transpose(0, 1), expected)

# --- fused path == explicit path ------------------------------------------------------------


@pytest.mark.parametrize(
    "mask_kind",
    ["none", "padding", "causal", "float", "empty_rows", "per_head", "mask_and_bias", "is_causal"],
)
def test_fused_equals_explicit(mask_kind: str) -> None:
    mha = MultiHeadAttention(20, 5, kdim=KDIM, vdim=VDIM).double()
    query = torch.randn(B, TQ, 20, dtype=torch.float64, requires_grad=True)
    key, value = (
        torch.randn(B, TK, KDIM, dtype=torch.float64),
        torch.randn(B, TK, VDIM, dtype=torch.float64),
    )
    empty = random_bool_mask(B, 1, TQ, TK)
    empty[1, 0, 3] = False
    bias = torch.randn(1, 5, TQ, TK, dtype=torch.float64)
    kwargs = {
        "none": {},
        "padding": {"mask": masks.padding_mask(torch.tensor([TK, 2]), TK)},
        "causal": {"mask": masks.causal_mask(TQ, TK)},
        "float": {"bias": bias},
        "empty_rows": {"mask": empty},
        "per_head": {"mask": random_bool_mask(B, 5, TQ, TK)},
        "mask_and_bias": {"mask": empty, "bias": bias},
        "is_causal": {"is_causal": True, "mask": masks.padding_mask(torch.tensor([TK, 2]), TK)},
    }[mask_kind]
    outs, grads = [], []
    for fused in (True, False):
        mha.fused = fused
        out, _ = mha(query, key, value, **kwargs)
        (grad,) = torch.autograd.grad(out.square().sum(), query)
        outs.append(out)
        grads.append(grad)
    close(outs[0], outs[1])
    close(grads[0], grads[1])


@pytest.mark.parametrize("fused", [True, False])
def test_mha_fully_masked_rows_give_zeros_and_finite_grads(fused: bool) -> None:
    mha = MultiHeadAttention(D, H, bias=False)  # no bias: a zero attention output stays zero
    mha.fused = fused
    x = torch.randn(B, TQ, D, requires_grad=True)
    pad = masks.padding_mask(torch.tensor([TQ, 2]), TQ)  # (B, 1, 1, TQ)
    mask = pad & pad.transpose(-1, -2)  # (B, 1, TQ, TQ): padded queries attend to nothing
    mask[0, 0, 1] = False  # batch 0, query 1: no key at all
    out, _ = mha(x, mask=mask)
    assert torch.equal(out[0, 1], torch.zeros(D)) and torch.equal(
        out[1, 2:], torch.zeros(TQ - 2, D)
    )
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and all(
        torch.isfinite(p.grad).all() for p in mha.parameters()
    )
    if not fused:
        _, weights = mha(x, mask=mask, need_weights=True, average_attn_weights=False)
        assert torch.equal(weights[0, :, 1], torch.zeros(H, TQ))


def test_fused_path_never_hands_torch_an_empty_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # Older PyTorch versions return NaN for rows with nothing to attend to: we must not rely on them.
    seen = []

    def spy(
        q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None, **kwargs: object
    ) -> Tensor:
        seen.append(attn_mask)
        allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask > float("-inf")
        if not allowed.any(-1).all():  # behave like an old PyTorch
            return torch.full_like(q, float("nan"))
        return real(q, k, v, attn_mask=attn_mask, **kwargs)

    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    mha = MultiHeadAttention(D, H, bias=False)
    x = torch.randn(B, TQ, D)
    mask = random_bool_mask(B, 1, TQ, TQ)
    mask[0, 0, 1] = False
    bias = masks.to_additive(mask)
    for kwargs in ({"mask": mask}, {"bias": bias}, {"mask": mask, "bias": torch.randn(TQ, TQ)}):
        out, _ = mha(x, **kwargs)
        assert torch.isfinite(out).all() and torch.equal(out[0, 1], torch.zeros(D))
    assert len(seen) == 3


def test_mha_gradcheck_inputs_and_parameters() -> None:
    mha = MultiHeadAttention(6, 3, kdim=5, vdim=4).double()
    names = [n for n, _ in mha.named_parameters()]
    query = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    key = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    value = torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True)
    mask = random_bool_mask(2, 1, 3, 4)
    mask[0, 0, 2] = False

    def f(query: Tensor, key: Tensor, value: Tensor, *params: Tensor) -> Tensor:
        state = dict(zip(names, params, strict=True))
        return torch.func.functional_call(mha, state, (query, key, value), {"mask": mask})[0]

    params = tuple(p.detach().clone().requires_grad_() for p in mha.parameters())
    for fused in (False, True):
        mha.fused = fused
        assert torch.autograd.gradcheck(f, (query, key, value, *params), fast_mode=True)


# --- properties -----------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False])
def test_self_attention_is_permutation_equivariant(fused: bool) -> None:
    mha = MultiHeadAttention(20, 5).double()
    mha.fused = fused
    x = torch.randn(B, 9, 20, dtype=torch.float64)
    perm = torch.randperm(9)
    out, _ = mha(x)
    out_perm, _ = mha(x[:, perm])
    close(out_perm, out[:, perm])


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("how", ["mask", "is_causal"])
def test_causal_attention_never_sees_the_future(fused: bool, how: str) -> None:
    mha = MultiHeadAttention(D, H).double()
    mha.fused = fused
    x = torch.randn(B, 8, D, dtype=torch.float64)
    kwargs = {"mask": masks.causal_mask(8)} if how == "mask" else {"is_causal": True}
    out, _ = mha(x, **kwargs)
    for t in range(7):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn(B, 7 - t, D, dtype=torch.float64)
        out_changed, _ = mha(changed, **kwargs)
        close(out_changed[:, : t + 1], out[:, : t + 1])
        assert not torch.allclose(out_changed[:, t + 1 :], out[:, t + 1 :])


@pytest.mark.parametrize("fused", [True, False])
def test_is_causal_equals_causal_mask(fused: bool) -> None:
    mha = MultiHeadAttention(D, H).double()
    mha.fused = fused
    x, memory = (
        torch.randn(B, TQ, D, dtype=torch.float64),
        torch.randn(B, TK, D, dtype=torch.float64),
    )
    close(mha(x, is_causal=True)[0], mha(x, mask=masks.causal_mask(TQ))[0])
    # with more keys than queries, the queries are the last positions, as with a cache
    close(mha(x, memory, is_causal=True)[0], mha(x, memory, mask=masks.causal_mask(TQ, TK))[0])
    pad = masks.padding_mask(torch.tensor([TQ, 3]), TQ)
    close(
        mha(x, mask=pad, is_causal=True)[0],
        mha(x, mask=masks.combine(pad, masks.causal_mask(TQ)))[0],
    )


@pytest.mark.parametrize("fused", [True, False])
def test_padding_never_changes_real_tokens(fused: bool) -> None:
    mha = MultiHeadAttention(D, H).double()
    mha.fused = fused
    lengths = torch.tensor([6, 3, 4])
    x = torch.randn(3, 6, D, dtype=torch.float64)
    mask = masks.padding_mask(lengths, 6)
    out, _ = mha(x, mask=mask)
    noisy = x.clone()
    for b, n in enumerate(lengths.tolist()):
        noisy[b, n:] = 100 * torch.randn(6 - n, D, dtype=torch.float64)
    out_noisy, _ = mha(noisy, mask=mask)
    for b, n in enumerate(lengths.tolist()):
        close(out_noisy[b, :n], out[b, :n])
        close(out[b, :n], mha(x[b : b + 1, :n])[0][0])  # same as the unpadded sequence alone


# --- KV cache -------------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False])
def test_kv_cache_one_token_at_a_time_equals_full_causal(fused: bool) -> None:
    mha = MultiHeadAttention(20, 5).double().eval()
    mha.fused = fused
    x = torch.randn(B, 7, 20, dtype=torch.float64)
    full, _ = mha(x, mask=masks.causal_mask(7))
    cache = KVCache()
    steps = []
    for t in range(7):
        out, _ = mha(x[:, t : t + 1], cache=cache)
        assert cache.length == t + 1 and cache.k.shape == (B, 5, t + 1, 4)
        steps.append(out)
    close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("fused", [True, False])
def test_kv_cache_in_chunks_with_offset_causal_mask(fused: bool) -> None:
    mha = MultiHeadAttention(D, H).double().eval()
    mha.fused = fused
    x = torch.randn(B, 9, D, dtype=torch.float64)
    full, _ = mha(x, is_causal=True)
    cache, outs, start = KVCache(), [], 0
    for size in (4, 1, 3, 1):
        chunk = x[:, start : start + size]
        mask = masks.causal_mask(size, cache.length + size)
        outs.append(mha(chunk, mask=mask, cache=cache)[0])
        start += size
    close(torch.cat(outs, dim=1), full)
    # is_causal uses the same offset convention
    cache.reset()
    assert cache.length == 0 and cache.k is None and cache.v is None
    first, _ = mha(x[:, :5], cache=cache, is_causal=True)
    rest, _ = mha(x[:, 5:], cache=cache, is_causal=True)
    close(torch.cat([first, rest], dim=1), full)


def test_static_cache_for_cross_attention() -> None:
    mha = MultiHeadAttention(D, H, kdim=KDIM, vdim=VDIM).double().eval()
    y = torch.randn(B, TQ, D, dtype=torch.float64)
    memory, memory_v = (
        torch.randn(B, TK, KDIM, dtype=torch.float64),
        torch.randn(B, TK, VDIM, dtype=torch.float64),
    )
    full, _ = mha(y, memory, memory_v)
    cache = KVCache(static=True)
    outs = [mha(y[:, :2], memory, memory_v, cache=cache)[0]]
    k_before = cache.k
    assert cache.length == TK and cache.static
    outs.append(mha(y[:, 2:], memory[:, :], memory_v, cache=cache)[0])  # a view: the same memory
    assert cache.k is k_before
    close(torch.cat(outs, dim=1), full)


def test_static_cache_refuses_another_memory() -> None:
    """A filled cross-attention cache never serves the previous source's keys to a new one."""
    mha = MultiHeadAttention(D, H, kdim=KDIM, vdim=VDIM).double().eval()
    y = torch.randn(B, TQ, D, dtype=torch.float64)  # TQ != TK, D != KDIM != VDIM
    memory, memory_v = torch.randn(B, TK, KDIM, dtype=torch.float64), torch.randn(B, TK, VDIM).double()
    cache = KVCache(static=True)
    mha(y[:, :1], memory, memory_v, cache=cache)
    new_source = torch.randn(B, TK, KDIM, dtype=torch.float64)  # same shape, another batch
    with pytest.raises(ValueError, match=r"filled from another memory of shape \(2, 7, 11\).*cache.reset\(\)"):
        mha(y[:, 1:2], new_source, memory_v, cache=cache)
    with pytest.raises(ValueError, match=r"memory of shape \(2, 4, 11\) passed now"):
        mha(y[:, 1:2], memory[:, :4], memory_v[:, :4], cache=cache)  # another source length
    mha(y[:, 1:2], memory.clone(), memory_v, cache=cache)  # a memory recomputed equal: accepted
    cache.reset()  # then the new source is projected
    out, _ = mha(y, new_source, memory_v, cache=cache)
    close(out, mha(y, new_source, memory_v)[0])
    branch = copy.copy(cache)  # a branch keeps the source it was filled from
    close(mha(y, new_source, memory_v, cache=branch)[0], out)


@pytest.mark.parametrize("fused", [True, False])
def test_rotary_mha_matches_the_formula_and_its_cache(fused: bool) -> None:
    rope = RotaryEmbedding(4, max_len=16).double()  # head_dim = 20 / 5
    mha = MultiHeadAttention(20, 5, rotary=rope).double().eval()
    mha.fused = fused
    x = torch.randn(B, 7, 20, dtype=torch.float64)
    full, _ = mha(x, is_causal=True)
    # the formula: rotate the per-head queries and keys by their positions, then attend
    q = rope.rotate(mha.q_proj(x).view(B, 7, 5, 4), layout="BTHD").transpose(1, 2)
    k = rope.rotate(mha.k_proj(x).view(B, 7, 5, 4), layout="BTHD").transpose(1, 2)
    v = mha.v_proj(x).view(B, 7, 5, 4).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
    close(full, mha.out_proj(ctx.transpose(1, 2).reshape(B, 7, 20)))
    # one token at a time: positions continue from the cache length
    cache = KVCache()
    steps = [mha(x[:, t : t + 1], cache=cache)[0] for t in range(7)]
    close(torch.cat(steps, dim=1), full)
    # and the positions matter: without rotary the output differs
    plain = MultiHeadAttention(20, 5).double().eval()
    plain.load_state_dict(mha.state_dict())
    assert not torch.allclose(plain(x, is_causal=True)[0], full)


def test_rotary_mha_checks() -> None:
    with pytest.raises(
        ValueError, match=r"rotary must be a RotaryEmbedding\(head_dim=5\) or None, got head_dim=4"
    ):
        MultiHeadAttention(D, H, rotary=RotaryEmbedding(4))
    with pytest.raises(
        ValueError, match=r"rotary must be a RotaryEmbedding\(head_dim=5\) or None, got str"
    ):
        MultiHeadAttention(D, H, rotary="rope")  # type: ignore[arg-type]
    mha = MultiHeadAttention(20, 5, rotary=RotaryEmbedding(4))
    with pytest.raises(ValueError, match=r"static \(cross-attention\) cache cannot use them"):
        mha(torch.randn(B, TQ, 20), torch.randn(B, TK, 20), cache=KVCache(static=True))


def test_kv_cache_update_appends() -> None:
    cache = KVCache()
    assert cache.length == 0 and not cache.filled
    k1, v1 = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)
    k2, v2 = torch.randn(2, 3, 1, 5), torch.randn(2, 3, 1, 5)
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    assert cache.length == 5 and k.shape == (2, 3, 5, 5)
    assert torch.equal(k[:, :, 4:], k2) and torch.equal(v[:, :, :4], v1)
    static = KVCache(static=True)
    static.update(k1, v1)
    k, v = static.update(k2, v2)  # a filled static cache only returns what it holds
    assert k is k1 and v is v1 and static.length == 4
    assert KVCache() != KVCache()  # compared by identity, never element-wise



def test_kv_cache_chunked_appends_without_grad_grow_the_buffer() -> None:
    # chunks longer than the buffer's room, written in place (no autograd: the in-place path)
    cache, chunks = KVCache(), []
    with torch.no_grad():
        for size in (4, 20, 3, 40, 1, 90):  # 4 cached, then a 20-token chunk: more than 2 * 4
            k, v = torch.randn(B, H, size, 6), torch.randn(B, H, size, 6)
            chunks.append((k, v))
            k_all, v_all = cache.update(k, v)
            torch.testing.assert_close(k_all, torch.cat([c[0] for c in chunks], dim=2), rtol=0, atol=0)
            torch.testing.assert_close(v_all, torch.cat([c[1] for c in chunks], dim=2), rtol=0, atol=0)
            assert cache.k is k_all and cache.length == sum(c[0].shape[2] for c in chunks)
    # and through the module: chunked prefill under no_grad equals the full causal pass
    mha = MultiHeadAttention(D, H).double().eval()
    x = torch.randn(B, 30, D, dtype=torch.float64)
    with torch.no_grad():
        full, _ = mha(x, is_causal=True)
        cache, outs, start = KVCache(), [], 0
        for size in (4, 20, 6):
            mask = masks.causal_mask(size, cache.length + size)
            outs.append(mha(x[:, start : start + size], mask=mask, cache=cache)[0])
            start += size
    close(torch.cat(outs, dim=1), full)


@pytest.mark.parametrize("first", ["original", "copy"])
def test_kv_cache_copies_are_independent_branches(first: str) -> None:
    # issue 25: copy.copy shared the growth buffer, so one branch overwrote the other's keys
    k0, v0 = torch.randn(B, H, 4, 6), torch.randn(B, H, 4, 6)
    k1, v1 = torch.randn(B, H, 1, 6), torch.randn(B, H, 1, 6)
    branch_keys = {name: torch.randn(B, H, 2, 6) for name in ("original", "copy")}
    with torch.no_grad():  # the in-place path
        cache = KVCache()
        cache.update(k0, v0)
        cache.update(k1, v1)  # now in a buffer with room to spare
        branches = {"original": cache, "copy": copy.copy(cache)}
        for name in (first, *{"original", "copy"} - {first}):
            branches[name].update(branch_keys[name], branch_keys[name] + 1)
    for name, branch in branches.items():  # each sees only its own keys
        expected = torch.cat([k0, k1, branch_keys[name]], dim=2)  # (B, H, 7, Dh)
        torch.testing.assert_close(branch.k, expected, rtol=0, atol=0)
        torch.testing.assert_close(branch.v, torch.cat([v0, v1, branch_keys[name] + 1], 2), rtol=0, atol=0)
    assert branches["copy"].static is False and copy.copy(KVCache(static=True)).static
    deep = copy.deepcopy(cache)  # deepcopy stays independent too
    with torch.no_grad():
        deep.update(k1, v1)
        cache.update(-k1, -v1)
    torch.testing.assert_close(deep.k[:, :, -1:], k1, rtol=0, atol=0)


def test_kv_cache_copy_in_a_beam_search_by_hand() -> None:
    # three branches of one cache, stepped in turn: each output equals recomputing its prefix
    mha = MultiHeadAttention(D, H).double().eval()
    prefix = torch.randn(B, 5, D, dtype=torch.float64)
    tails = torch.randn(3, B, 2, D, dtype=torch.float64)  # branch i feeds tails[i], 1 token a step
    with torch.no_grad():
        cache = KVCache()
        mha(prefix[:, :4], cache=cache, is_causal=True)
        mha(prefix[:, 4:], cache=cache)  # now in a buffer with room to spare
        branches = [copy.copy(cache) for _ in tails]
        for t in range(2):
            for tail, branch in zip(tails, branches, strict=True):
                out = mha(tail[:, t : t + 1], cache=branch)[0]  # (B, 1, D)
                x = torch.cat([prefix, tail[:, : t + 1]], dim=1)  # (B, 6 + t, D) the branch's prefix
                close(out, mha(x, is_causal=True)[0][:, -1:])

def test_mha_under_autocast() -> None:
    mha = MultiHeadAttention(D, H, kdim=KDIM, vdim=KDIM)
    query, key = torch.randn(B, TQ, D).bfloat16(), torch.randn(B, TK, KDIM)  # mixed dtypes
    cache = KVCache(static=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for fused in (True, False):
            mha.fused = fused
            mask = torch.ones(TQ, TK, dtype=torch.bool)
            out, _ = mha(query, key, mask=mask, bias=torch.zeros(TQ, TK), cache=cache)
            assert out.dtype == torch.bfloat16 and cache.k.dtype == torch.bfloat16


# --- module details -------------------------------------------------------------------------


def test_mha_dropout_only_in_training() -> None:
    mha = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(B, TQ, D)
    mha.eval()
    ref, _ = mha(x)
    mha.train()
    for fused in (True, False):
        mha.fused = fused
        assert not torch.allclose(mha(x)[0], ref)
    mha.eval()
    close(mha(x)[0], ref)


def test_mha_weights_none_unless_requested_and_structure() -> None:
    mha = MultiHeadAttention(D, H, kdim=KDIM, vdim=VDIM, bias=False)
    assert [n for n, _ in mha.named_children()] == ["q_proj", "k_proj", "v_proj", "out_proj"]
    assert mha.k_proj.in_features == KDIM and mha.v_proj.in_features == VDIM
    assert all(p.bias is None for p in mha.children())
    assert mha.fused is True and mha.head_dim == 5
    query, key, value = _inputs({"cross": True, "kdim": KDIM, "vdim": VDIM}, torch.float32)
    mha.fused = False
    out, weights = mha(query, key, value)
    assert out.shape == (B, TQ, D) and weights is None
    assert "kdim=11, vdim=6" in repr(mha) and "num_heads=3" in repr(mha)
    assert "kdim" not in repr(MultiHeadAttention(D, H))
    restored = pickle.loads(pickle.dumps(mha))  # no lambdas on the module
    close(restored(query, key, value)[0], out)


def test_value_defaults_to_key() -> None:
    mha = MultiHeadAttention(D, H, kdim=KDIM, vdim=KDIM)
    query, key = torch.randn(B, TQ, D), torch.randn(B, TK, KDIM)
    close(mha(query, key)[0], mha(query, key, key)[0])


# --- AdditiveAttention ----------------------------------------------------------------------


def test_additive_attention_matches_the_formula() -> None:
    att = AdditiveAttention(qdim=4, kdim=6, hidden_dim=8).double()
    query = torch.randn(B, 3, 4, dtype=torch.float64)
    keys, values = (
        torch.randn(B, 5, 6, dtype=torch.float64),
        torch.randn(B, 5, 7, dtype=torch.float64),
    )
    mask = masks.padding_mask(torch.tensor([5, 2]), 5)[:, 0]  # (B, 1, 5)
    out, weights = att(query, keys, values, mask=mask)
    assert out.shape == (B, 3, 7) and weights.shape == (B, 3, 5)
    for b in range(B):
        for i in range(3):
            scores = torch.stack(
                [
                    att.score_proj(torch.tanh(att.q_proj(query[b, i]) + att.k_proj(keys[b, j])))[0]
                    for j in range(5)
                ]
            )
            scores = scores.masked_fill(~mask[b, 0], float("-inf"))
            close(weights[b, i], scores.softmax(0))
            close(out[b, i], scores.softmax(0) @ values[b])
    assert torch.equal(weights[1, :, 2:], torch.zeros(3, 3))


def test_additive_attention_fully_masked_row_and_gradcheck() -> None:
    att = AdditiveAttention(3, 5, 4).double()
    query = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    values = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    mask = random_bool_mask(2, 3, 4)
    mask[0, 1] = False
    out, weights = att(query, keys, values, mask=mask)
    assert torch.equal(out[0, 1], torch.zeros(2)) and torch.equal(weights[0, 1], torch.zeros(4))
    assert torch.autograd.gradcheck(
        lambda q, k, v: att(q, k, v, mask=mask), (query, keys, values), fast_mode=True
    )


def test_additive_attention_dropout_and_submodules() -> None:
    att = AdditiveAttention(3, 5, 4, dropout=0.5)
    assert [n for n, _ in att.named_children()] == ["q_proj", "k_proj", "score_proj", "dropout"]
    assert (
        att.q_proj.weight.shape == (4, 3)
        and att.k_proj.weight.shape == (4, 5)
        and att.score_proj.weight.shape == (1, 4)
    )
    assert att.q_proj.bias is None and att.k_proj.bias is None and att.score_proj.bias is None
    q, k, v = torch.randn(2, 3, 3), torch.randn(2, 6, 5), torch.randn(2, 6, 2)
    att.eval()
    _, w_eval = att(q, k, v)
    close(w_eval.sum(-1), torch.ones(2, 3))
    att.train()
    _, w_train = att(q, k, v)
    assert (w_train == 0).any()


# --- bad input: a clear error naming the argument and the expected shape, before any compute


class RecordOps(TorchFunctionMode):
    """Records the torch functions called while active."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


COMPUTE_OPS = {
    "linear",
    "matmul",
    "__matmul__",
    "softmax",
    "scaled_dot_product_attention",
    "bmm",
    "tanh",
    "masked_fill",
}


def _mha() -> MultiHeadAttention:
    return MultiHeadAttention(12, 3, kdim=7, vdim=5)


def _q(*shape: int, **kw: object) -> Tensor:
    return torch.randn(*shape, **kw)


BAD_CALLS = {
    "indivisible": (lambda: MultiHeadAttention(12, 5), ValueError, r"d_model=12 must be divisible by num_heads=5"),
    "zero_heads": (lambda: MultiHeadAttention(12, 0), ValueError, r"num_heads must be >= 1, got 0"),
    "zero_d_model": (lambda: MultiHeadAttention(0, 1), ValueError, r"d_model must be >= 1, got 0"),
    "float_d_model": (lambda: MultiHeadAttention(12.0, 3), TypeError, r"d_model must be an int, got float"),
    "bad_kdim": (lambda: MultiHeadAttention(12, 3, kdim=0), ValueError, r"kdim must be >= 1"),
    "dropout_one": (lambda: MultiHeadAttention(12, 3, dropout=1.0), ValueError, r"dropout must be a float in \[0, 1\), got 1.0"),
    "query_list": (lambda: _mha()([[0.0] * 12]), TypeError, r"query must be a Tensor of shape \(batch, q_len, d_model=12\), got list"),
    "query_int": (lambda: _mha()(torch.zeros(2, 4, 12, dtype=torch.long)), TypeError, r"query must be a floating-point Tensor of shape \(batch, q_len, d_model=12\)"),
    "query_2d": (lambda: _mha()(_q(4, 12)), ValueError, r"query must have shape \(batch, q_len, d_model=12\), got \(4, 12\)"),
    "query_width": (lambda: _mha()(_q(2, 5, 10)), ValueError, r"query must have shape \(batch, q_len, d_model=12\), got \(2, 5, 10\)"),
    "key_width": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 12), _q(2, 6, 5)), ValueError, r"key must have shape \(batch=2, k_len, kdim=7\), got \(2, 6, 12\)"),
    "self_attn_kdim": (lambda: _mha()(_q(2, 4, 12)), ValueError, r"key must have shape \(batch=2, k_len, kdim=7\).*self-attention \(key=None\) needs kdim == vdim == d_model=12"),
    "key_batch": (lambda: _mha()(_q(2, 4, 12), _q(3, 6, 7), _q(3, 6, 5)), ValueError, r"key must have shape \(batch=2, k_len, kdim=7\), got \(3, 6, 7\)"),
    "value_width": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 7)), ValueError, r"value must have shape \(batch=2, k_len=6, vdim=5\) like key, got \(2, 6, 7\)"),
    "value_length": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 5, 5)), ValueError, r"value must have shape \(batch=2, k_len=6, vdim=5\) like key, got \(2, 5, 5\)"),
    "value_without_key": (lambda: _mha()(_q(2, 4, 12), None, _q(2, 6, 5)), ValueError, r"value was given without key"),
    "mask_int": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=torch.ones(4, 6, dtype=torch.int64)), TypeError, r"mask must be a bool Tensor \(True = may attend\), got dtype torch.int64.*mask\.bool\(\).*masks\.from_key_padding_mask.*bias="),
    "mask_float": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=torch.zeros(4, 6)), TypeError, r"mask must be a bool Tensor \(True = may attend\), got dtype torch.float32.*mask\.bool\(\).*masks\.from_key_padding_mask.*bias="),
    "mask_inverted": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=~masks.causal_mask(4, 6)), ValueError, r"mask lets query 3 attend to no key in every sequence: True means MAY attend"),
    "mask_all_false": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=torch.zeros(4, 6, dtype=torch.bool)), ValueError, r"True means MAY attend"),
    "bias_bool": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), bias=torch.ones(4, 6, dtype=torch.bool)), TypeError, r"bias must be a float Tensor broadcastable to \(\.\.\., q_len=4, k_len=6\) \(a bool mask goes in mask=\), got dtype torch.bool"),
    "bias_shape": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), bias=torch.zeros(6, 4)), ValueError, r"bias must be broadcastable to \(\.\.\., q_len=4, k_len=6\) without growing it, got \(6, 4\)"),
    "bias_heads": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), bias=torch.zeros(1, 5, 4, 6)), ValueError, r"bias must be broadcastable .* got \(1, 5, 4, 6\)"),
    "bias_3d": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), bias=torch.zeros(2, 4, 6)), ValueError, r"bias of shape \(2, 4, 6\) is ambiguous .* \(batch=2, 1, q_len, k_len\)"),
    "bias_device": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), bias=torch.zeros(4, 6, device="meta")), ValueError, r"bias and query must have the same device"),
    "mask_shape": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=torch.ones(6, 4, dtype=torch.bool)), ValueError, r"mask must be broadcastable to \(batch=2, heads=3, q_len=4, k_len=6\), got \(6, 4\)"),
    "mask_3d": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=torch.ones(2, 4, 6, dtype=torch.bool)), ValueError, r"mask of shape \(2, 4, 6\) is ambiguous .* \(batch=2, 1, q_len, k_len\)"),
    "dtype": (lambda: _mha()(_q(2, 4, 12, dtype=torch.float64), _q(2, 6, 7, dtype=torch.float64), _q(2, 6, 5, dtype=torch.float64)), ValueError, r"parameters and query must have the same dtype"),
    "key_dtype": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7, dtype=torch.float64), _q(2, 6, 5)), ValueError, r"key and query must have the same dtype"),
    "device": (lambda: _mha()(_q(2, 4, 12, device="meta"), _q(2, 6, 7, device="meta"), _q(2, 6, 5, device="meta")), ValueError, r"parameters and query must have the same device"),
    "mask_device": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=torch.ones(4, 6, dtype=torch.bool, device="meta")), ValueError, r"mask and query must have the same device"),
    "causal_short_keys": (lambda: _mha()(_q(2, 4, 12), _q(2, 3, 7), _q(2, 3, 5), is_causal=True), ValueError, r"is_causal needs at least as many keys as queries \(q_len=4\), got k_len=3"),
    "cache_type": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache={}), TypeError, r"cache must be a KVCache or None, got dict"),
    "cache_batch": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache=KVCache(_q(3, 3, 2, 4), _q(3, 3, 2, 4))), ValueError, r"cache.k must have shape \(batch=2, num_heads=3, T_cached, head_dim=4\), got \(3, 3, 2, 4\)"),
    "cache_heads": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache=KVCache(_q(2, 4, 2, 3), _q(2, 4, 2, 3))), ValueError, r"cache.k must have shape \(batch=2, num_heads=3, T_cached, head_dim=4\), got \(2, 4, 2, 3\)"),
    "cache_v": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache=KVCache(_q(2, 3, 2, 4), _q(2, 3, 1, 4))), ValueError, r"cache.v must have the same shape as cache.k \(2, 3, 2, 4\), got \(2, 3, 1, 4\)"),
    "cache_v_missing": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache=KVCache(_q(2, 3, 2, 4), None)), TypeError, r"cache.v must be a Tensor of shape \(batch=2, num_heads=3, T_cached, head_dim=4\), got NoneType"),
    "cache_k_missing": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache=KVCache(None, _q(2, 3, 2, 4))), TypeError, r"cache.k must be a Tensor of shape \(batch=2, num_heads=3, T_cached, head_dim=4\), got NoneType"),
    "cache_mask": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), mask=masks.causal_mask(4, 6), cache=KVCache(_q(2, 3, 2, 4), _q(2, 3, 2, 4))), ValueError, r"mask must be broadcastable to \(batch=2, heads=3, q_len=4, k_len=8\), got \(4, 6\)"),
    "cache_dtype": (lambda: _mha()(_q(2, 4, 12), _q(2, 6, 7), _q(2, 6, 5), cache=KVCache(_q(2, 3, 2, 4).double(), _q(2, 3, 2, 4).double())), ValueError, r"parameters and cache.k must have the same dtype"),
    "sdpa_q": (lambda: scaled_dot_product_attention("q", _q(2, 6, 4), _q(2, 6, 3)), TypeError, r"q must be a Tensor of shape \(\.\.\., q_len, d_k\), got str"),
    "sdpa_dk": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 3), _q(2, 6, 3)), ValueError, r"k must have shape \(\.\.\., k_len, d_k=4\) like q, got \(2, 6, 3\)"),
    "sdpa_v_len": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 7, 3)), ValueError, r"v must have shape \(\.\.\., k_len=6, d_v\) like k, got \(2, 7, 3\)"),
    "sdpa_rank": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(6, 4), _q(6, 3)), ValueError, r"q, k and v must have the same rank >= 2"),
    "sdpa_batch": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(3, 6, 4), _q(3, 6, 3)), ValueError, r"q, k and v leading dims must broadcast"),
    "sdpa_mask": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), mask=torch.ones(3, 5, 6, dtype=torch.bool)), ValueError, r"mask must be broadcastable to \(batch=2, q_len=5, k_len=6\), got \(3, 5, 6\)"),
    "sdpa_mask_float": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), mask=torch.zeros(5, 6)), TypeError, r"mask must be a bool Tensor.*mask\.bool\(\).*from_key_padding_mask.*bias="),
    "sdpa_mask_inverted": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), mask=~masks.causal_mask(5, 6)), ValueError, r"True means MAY attend"),
    "sdpa_bias_bool": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), bias=torch.ones(5, 6, dtype=torch.bool)), TypeError, r"bias must be a float Tensor .*a bool mask goes in mask="),
    "sdpa_bias_shape": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), bias=torch.zeros(3, 5, 6)), ValueError, r"bias must be broadcastable to \(\.\.\., q_len=5, k_len=6\) without growing it, got \(3, 5, 6\)"),
    "sdpa_scale_zero": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), scale=0.0), ValueError, r"scale must be a positive finite number or None \(1/sqrt\(d_k\)\), got 0.0"),
    "sdpa_scale_negative": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), scale=-0.5), ValueError, r"scale must be a positive finite number .*got -0.5"),
    "sdpa_scale_inf": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), scale=float("inf")), ValueError, r"scale must be a positive finite number .*got inf"),
    "sdpa_scale_nan": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), scale=float("nan")), ValueError, r"scale must be a positive finite number .*got nan"),
    "sdpa_scale_bool": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), scale=True), ValueError, r"scale must be a positive finite number .*got True"),
    "sdpa_scale_tensor": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), scale=torch.tensor(0.5)), ValueError, r"scale must be a positive finite number"),
    "sdpa_dropout": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4), _q(2, 6, 3), dropout_p=1.5), ValueError, r"dropout_p must be a float in \[0, 1\), got 1.5"),
    "sdpa_dtype": (lambda: scaled_dot_product_attention(_q(2, 5, 4), _q(2, 6, 4).double(), _q(2, 6, 3)), ValueError, r"k and q must have the same dtype"),
    "additive_hidden": (lambda: AdditiveAttention(4, 6, 0), ValueError, r"hidden_dim must be >= 1, got 0"),
    "additive_dropout": (lambda: AdditiveAttention(4, 6, 8, dropout=-0.1), ValueError, r"dropout must be a float in \[0, 1\)"),
    "additive_query": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 5), _q(2, 7, 6), _q(2, 7, 2)), ValueError, r"query must have shape \(batch, q_len, qdim=4\), got \(2, 3, 5\)"),
    "additive_keys": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 4), _q(2, 7, 4), _q(2, 7, 2)), ValueError, r"key must have shape \(batch=2, k_len, kdim=6\), got \(2, 7, 4\)"),
    "additive_values": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 4), _q(2, 7, 6), _q(2, 5, 2)), ValueError, r"value must have shape \(batch=2, k_len=7, vdim\) like key, got \(2, 5, 2\)"),
    "additive_mask": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 4), _q(2, 7, 6), _q(2, 7, 2), mask=torch.ones(2, 1, 1, 7, dtype=torch.bool)), ValueError, r"mask must be broadcastable to \(batch=2, q_len=3, k_len=7\), got \(2, 1, 1, 7\)"),
    "additive_type": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 4), [[1.0]], _q(2, 7, 2)), TypeError, r"key must be a Tensor of shape \(batch=2, k_len, kdim=6\), got list"),
    "additive_mask_float": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 4), _q(2, 7, 6), _q(2, 7, 2), mask=torch.zeros(2, 1, 7)), TypeError, r"mask must be a bool Tensor.*mask\.bool\(\).*bias="),
    "additive_mask_inverted": (lambda: AdditiveAttention(4, 6, 8)(_q(2, 3, 4), _q(2, 7, 6), _q(2, 7, 2), mask=torch.zeros(3, 7, dtype=torch.bool)), ValueError, r"True means MAY attend"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_input_raises_before_compute(case: str) -> None:
    call, exc, match = BAD_CALLS[case]
    with RecordOps() as ops, pytest.raises(exc, match=match):
        call()
    computed = COMPUTE_OPS.intersection(ops.names)
    assert not computed, f"computed {computed} before raising"


def test_mha_scale_is_applied_on_both_paths_and_checked():
    """``scale=`` replaces 1/sqrt(d_head) on the fused and the explicit path (T5 uses 1.0)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, bias=False, scale=1.0).eval()
    x, mem = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    out_fused, _ = mha(x, mem, mem)
    out_explicit, w = mha(x, mem, mem, need_weights=True, average_attn_weights=False)
    q = mha.q_proj(x).view(2, 5, 3, 4).transpose(1, 2)  # (B, H, Tq, Dh)
    k = mha.k_proj(mem).view(2, 7, 3, 4).transpose(1, 2)  # (B, H, Tk, Dh)
    expected = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # no 1/sqrt(4)
    torch.testing.assert_close(w, expected)
    torch.testing.assert_close(out_fused, out_explicit)
    default = MultiHeadAttention(12, 3, bias=False).eval()
    default.load_state_dict(mha.state_dict())
    assert not torch.allclose(default(x, mem, mem)[0], out_fused, atol=1e-3)
    for bad in (0, -1.0, float("inf"), True, "1"):
        with pytest.raises(ValueError, match=r"scale must be a positive finite number"):
            MultiHeadAttention(12, 3, scale=bad)  # type: ignore[arg-type]
