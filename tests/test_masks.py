"""Tests of mtlib.masks: the one mask convention and the conversions from PyTorch's."""

import pytest
import torch
from torch import nn

from mtlib import masks
from mtlib.attention import MultiHeadAttention, masked_softmax

NEG_INF = float("-inf")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# --- causal_mask ----------------------------------------------------------------------------


def test_causal_mask_square_is_lower_triangular() -> None:
    mask = masks.causal_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    assert torch.equal(mask, torch.ones(4, 4, dtype=torch.bool).tril())


def test_causal_mask_offset_queries_are_the_last_positions() -> None:
    mask = masks.causal_mask(2, 5)  # queries at positions 3 and 4
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask, expected)
    # the same as the last rows of the full square mask, for every split
    for q_len in range(1, 6):
        assert torch.equal(masks.causal_mask(q_len, 5), masks.causal_mask(5)[-q_len:])


def test_causal_mask_single_step_sees_everything() -> None:
    assert masks.causal_mask(1, 6).all()


def test_causal_mask_device_argument() -> None:
    assert masks.causal_mask(3, 4, device="cpu").device.type == "cpu"
    assert masks.causal_mask(3, 4, device="meta").device.type == "meta"


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((0,), ValueError, r"q_len must be >= 1, got 0"),
        ((3, 2), ValueError, r"k_len must be >= q_len=3"),
        ((3, 0), ValueError, r"k_len must be >= 1"),
        ((2.0,), TypeError, r"q_len must be an int, got float"),
        ((True,), TypeError, r"q_len must be an int, got bool"),
    ],
)
def test_causal_mask_bad_input(args: tuple, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        masks.causal_mask(*args)


# --- padding masks --------------------------------------------------------------------------


def test_padding_mask_values_and_shape() -> None:
    mask = masks.padding_mask(torch.tensor([2, 0, 4]), max_len=5)
    assert mask.shape == (3, 1, 1, 5) and mask.dtype == torch.bool
    expected = torch.tensor([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    assert torch.equal(mask[:, 0, 0], expected)


def test_padding_mask_default_length_is_the_longest() -> None:
    mask = masks.padding_mask(torch.tensor([3, 1]))
    assert mask.shape == (2, 1, 1, 3)
    assert mask[0].all() and mask[1, 0, 0].tolist() == [True, False, False]


@pytest.mark.parametrize(
    ("lengths", "max_len", "exc", "match"),
    [
        ([1, 2], None, TypeError, r"lengths must be a Tensor of shape \(batch,\)"),
        (
            torch.tensor([1.0, 2.0]),
            None,
            ValueError,
            r"lengths must be an integer tensor of shape \(batch,\)",
        ),
        (torch.tensor([[1, 2]]), None, ValueError, r"shape \(batch,\), got torch.int64 \(1, 2\)"),
        (torch.tensor([1, 6]), 4, ValueError, r"lengths must lie in \[0, max_len=4\]"),
        (torch.tensor([-1, 2]), 4, ValueError, r"lengths must lie in \[0, max_len=4\]"),
        (torch.tensor([1, 2]), -3, ValueError, r"max_len must be a non-negative int"),
    ],
)
def test_padding_mask_bad_input(
    lengths: object, max_len: int | None, exc: type, match: str
) -> None:
    with pytest.raises(exc, match=match):
        masks.padding_mask(lengths, max_len)


def test_padding_mask_from_tokens() -> None:
    tokens = torch.tensor([[5, 6, 0, 0], [0, 7, 8, 9]])
    mask = masks.padding_mask_from_tokens(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [False, True, True, True]]
    with pytest.raises(
        ValueError, match=r"tokens must have shape \(batch, seq_len >= 1\), got \(4,\)"
    ):
        masks.padding_mask_from_tokens(tokens[0], pad_id=0)
    with pytest.raises(
        TypeError, match=r"tokens must be a Tensor of token ids, shape \(batch, seq_len\), got list"
    ):
        masks.padding_mask_from_tokens([[1, 2]], pad_id=0)
    with pytest.raises(
        TypeError,
        match=r"tokens must hold integer token ids \(torch.long\), got dtype torch.float32",
    ):
        masks.padding_mask_from_tokens(tokens.float(), pad_id=0)


# --- combine and to_additive ----------------------------------------------------------------


def test_combine_bool_is_logical_and_with_broadcasting() -> None:
    causal = masks.causal_mask(3, 4)  # (3, 4)
    pad = masks.padding_mask(torch.tensor([2, 4]), 4)  # (2, 1, 1, 4)
    combined = masks.combine(causal, None, pad)
    assert combined.shape == (2, 1, 3, 4) and combined.dtype == torch.bool
    assert torch.equal(combined, causal & pad)
    assert combined[0, 0, 2].tolist() == [True, True, False, False]


def test_combine_none() -> None:
    assert masks.combine() is None
    assert masks.combine(None, None) is None
    mask = masks.causal_mask(3)
    assert masks.combine(None, mask) is mask


def test_combine_refuses_a_float_mask() -> None:
    # 0.2: masks are bool only; a float bias no longer turns the combination into a bias
    bias = torch.randn(3, 3, dtype=torch.float64)
    for args in (
        (masks.causal_mask(3), bias),
        (bias.float(), bias),
        (torch.ones(3, 3, dtype=torch.long),),
    ):
        with pytest.raises(
            TypeError,
            match=r"each mask must be a bool Tensor.*mask\.bool\(\).*from_key_padding_mask.*bias=",
        ):
            masks.combine(*args)


def test_mask_and_bias_combine_in_the_bias_argument() -> None:
    # what combine(bool, bias) used to return is now what mask= and bias= do together
    scores = torch.randn(2, 3, 4, dtype=torch.float64)
    causal = masks.causal_mask(3, 4)
    bias = torch.randn(3, 4, dtype=torch.float64)
    expected = (scores + bias.masked_fill(~causal, NEG_INF)).softmax(-1)
    torch.testing.assert_close(masked_softmax(scores, mask=causal, bias=bias), expected)
    torch.testing.assert_close(
        masked_softmax(scores, bias=masks.to_additive(causal, torch.float64) + bias), expected
    )
    # a bias of another precision follows the scores' dtype
    assert masked_softmax(scores, mask=causal, bias=bias.float()).dtype == torch.float64


def test_to_additive() -> None:
    mask = torch.tensor([[True, False], [False, False]])
    bias = masks.to_additive(mask, torch.float64)
    assert bias.dtype == torch.float64
    assert bias.tolist() == [[0.0, NEG_INF], [NEG_INF, NEG_INF]]
    assert masks.to_additive(mask).dtype == torch.float32
    floats = torch.tensor([0.5, NEG_INF])  # 0.2: a float input is refused, not passed through
    with pytest.raises(
        TypeError,
        match=r"mask must be a bool Tensor.*got dtype torch.float32.*mask\.bool\(\).*bias=",
    ):
        masks.to_additive(floats, torch.float64)
    with pytest.raises(TypeError, match=r"mask must be a bool Tensor .*got dtype torch.int64"):
        masks.to_additive(torch.ones(2, 2, dtype=torch.long))


# --- conversions from PyTorch's conventions -------------------------------------------------


def test_from_key_padding_mask_flips_bool() -> None:
    kpm = torch.tensor([[False, False, True], [False, True, True]])  # True = ignore
    ours = masks.from_key_padding_mask(kpm)
    assert ours.shape == (2, 1, 1, 3)
    assert torch.equal(ours[:, 0, 0], ~kpm)
    assert torch.equal(ours, masks.padding_mask(torch.tensor([2, 1]), 3))


def test_from_key_padding_mask_refuses_a_float_bias() -> None:
    # 0.2: a float key_padding_mask is an additive bias, and biases go in bias=
    kpm = torch.tensor([[0.0, NEG_INF, 0.0]])
    with pytest.raises(
        TypeError, match=r"key_padding_mask must be a bool Tensor.*bias=kpm\[:, None, None, :\]"
    ):
        masks.from_key_padding_mask(kpm)


@pytest.mark.parametrize(
    ("kpm", "exc", "match"),
    [
        ([[True]], TypeError, r"key_padding_mask must be a bool Tensor \(True = ignore, PyTorch's sign\), got list"),
        (
            torch.zeros(2, 3, 4, dtype=torch.bool),
            ValueError,
            r"shape \(batch, k_len\), got \(2, 3, 4\)",
        ),
        (
            torch.zeros(2, 3, dtype=torch.long),
            TypeError,
            r"key_padding_mask must be a bool Tensor \(True = ignore, PyTorch's sign\), got dtype torch.int64. A 0/1 mask converts with .bool\(\)",
        ),
    ],
)
def test_from_key_padding_mask_bad_input(kpm: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        masks.from_key_padding_mask(kpm)


def test_from_attn_mask_2d() -> None:
    ignore = torch.tensor([[False, True], [False, False]])
    assert torch.equal(masks.from_attn_mask(ignore), ~ignore)
    # 0.2: a float attn_mask is a bias, refused with the way to pass it
    bias = torch.tensor([[0.0, -2.0], [NEG_INF, 0.0]])
    with pytest.raises(
        TypeError, match=r"attn_mask must be a bool Tensor.*pass it as bias="
    ):
        masks.from_attn_mask(bias)
    with pytest.raises(TypeError, match=r"a float one is an additive bias: pass it as bias="):
        masks.from_attn_mask(bias.expand(6, 2, 2), num_heads=3)


def test_from_attn_mask_3d_splits_batch_and_heads() -> None:
    batch, heads, q_len, k_len = 2, 3, 4, 5
    ignore = torch.rand(batch * heads, q_len, k_len) < 0.3
    ours = masks.from_attn_mask(ignore, num_heads=heads)
    assert ours.shape == (batch, heads, q_len, k_len)
    # PyTorch's (B * H) dimension is batch-major: row b * H + h is batch b, head h
    assert torch.equal(ours[1, 2], ~ignore[1 * heads + 2])


@pytest.mark.parametrize(
    ("attn_mask", "num_heads", "exc", "match"),
    [
        ([[True]], None, TypeError, r"attn_mask must be a bool Tensor \(True = ignore, PyTorch's sign\), got list"),
        (
            torch.zeros(6, 4, 5, dtype=torch.bool),
            None,
            ValueError,
            r"needs num_heads dividing its first dim",
        ),
        (
            torch.zeros(6, 4, 5, dtype=torch.bool),
            4,
            ValueError,
            r"needs num_heads dividing its first dim",
        ),
        (
            torch.zeros(1, 6, 4, 5, dtype=torch.bool),
            3,
            ValueError,
            r"shape \(q_len, k_len\) or \(batch \* num_heads",
        ),
        (
            torch.zeros(4, 5, dtype=torch.int32),
            None,
            TypeError,
            r"attn_mask must be a bool Tensor \(True = ignore, PyTorch's sign\), got dtype torch.int32",
        ),
    ],
)
def test_from_attn_mask_bad_input(
    attn_mask: object, num_heads: int | None, exc: type, match: str
) -> None:
    with pytest.raises(exc, match=match):
        masks.from_attn_mask(attn_mask, num_heads)


def _torch_and_ours(
    d_model: int = 15, heads: int = 3
) -> tuple[nn.MultiheadAttention, MultiHeadAttention]:
    ref = nn.MultiheadAttention(d_model, heads, batch_first=True).double().eval()
    return ref, MultiHeadAttention.from_torch(ref).eval()


@pytest.mark.parametrize("fused", [True, False])
def test_converted_key_padding_mask_matches_torch(fused: bool) -> None:
    ref, ours = _torch_and_ours()
    ours.fused = fused
    x = torch.randn(3, 6, 15, dtype=torch.float64)
    kpm = torch.arange(6) >= torch.tensor([6, 4, 1])[:, None]  # (3, 6), True = padding
    expected, _ = ref(x, x, x, key_padding_mask=kpm, need_weights=False)
    got, _ = ours(x, mask=masks.from_key_padding_mask(kpm))
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)
    # a float key_padding_mask means the same thing, passed as a bias
    float_kpm = torch.zeros(3, 6, dtype=torch.float64).masked_fill(kpm, NEG_INF)
    expected_float, _ = ref(x, x, x, key_padding_mask=float_kpm, need_weights=False)
    got_float, _ = ours(x, bias=float_kpm[:, None, None, :])
    torch.testing.assert_close(got_float, expected_float, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(got_float, expected, atol=1e-10, rtol=1e-10)


def test_converted_attn_mask_and_padding_combined_match_torch() -> None:
    ref, ours = _torch_and_ours(d_model=20, heads=5)
    q, kv = torch.randn(2, 4, 20, dtype=torch.float64), torch.randn(2, 7, 20, dtype=torch.float64)
    ignore = torch.rand(2 * 5, 4, 7) < 0.3
    ignore[..., 0] = False  # keep at least one key per row: PyTorch gives NaN otherwise
    kpm = torch.tensor([[False] * 7, [False] * 5 + [True] * 2])
    expected, expected_w = ref(
        q, kv, kv, attn_mask=ignore, key_padding_mask=kpm, average_attn_weights=False
    )
    mask = masks.combine(
        masks.from_attn_mask(ignore, num_heads=5), masks.from_key_padding_mask(kpm)
    )
    got, got_w = ours(q, kv, mask=mask, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(got_w, expected_w, atol=1e-10, rtol=1e-10)


# --- check_mask -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [(4, 6), (1, 6), (4, 1), (2, 1, 1, 6), (2, 3, 4, 6), (1, 3, 4, 6), (3, 4, 6), (1, 4, 6)],
)
def test_check_mask_accepts_broadcastable(shape: tuple[int, ...]) -> None:
    masks.check_mask(torch.ones(shape, dtype=torch.bool), 4, 6, batch_shape=(2, 3))
    masks.check_mask(torch.ones(shape, dtype=torch.bool), 4, 6)  # any batch and heads
    masks.check_mask(None, 4, 6)
    # 0.2: a float tensor of the same shape is a bias, no longer accepted as a mask
    with pytest.raises(
        TypeError, match=r"mask must be a bool Tensor.*mask\.bool\(\).*from_key_padding_mask.*bias="
    ):
        masks.check_mask(torch.zeros(shape), 4, 6)


@pytest.mark.parametrize(
    ("mask", "exc", "match"),
    [
        ([[True]], TypeError, r"my_mask must be a bool Tensor \(True = may attend\), got list"),
        (torch.ones(4, 6, dtype=torch.int64), TypeError, r"my_mask must be a bool Tensor \(True = may attend\), got dtype torch.int64.*mask\.bool\(\).*from_key_padding_mask.*bias="),
        (torch.zeros(4, 6), TypeError, r"my_mask must be a bool Tensor \(True = may attend\), got dtype torch.float32.*mask\.bool\(\).*from_key_padding_mask.*bias="),
        (torch.ones(4, 5, dtype=torch.bool), ValueError, r"my_mask must be broadcastable to \(batch=2, heads=3, q_len=4, k_len=6\), got \(4, 5\)"),
        (torch.ones(6, 4, dtype=torch.bool), ValueError, r"got \(6, 4\)"),
        (torch.ones(5, 4, 6, dtype=torch.bool), ValueError, r"got \(5, 4, 6\)"),
        (torch.ones(3, 1, 4, 6, dtype=torch.bool), ValueError, r"got \(3, 1, 4, 6\)"),
        (torch.ones(1, 2, 3, 4, 6, dtype=torch.bool), ValueError, r"got \(1, 2, 3, 4, 6\)"),
        (torch.ones(6, dtype=torch.bool), ValueError, r"got \(6,\)"),
    ],
)  # fmt: skip
def test_check_mask_rejects(mask: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        masks.check_mask(mask, 4, 6, "my_mask", batch_shape=(2, 3))


@pytest.mark.parametrize(
    "mask", [~masks.causal_mask(4, 6)[None, None], torch.zeros(1, 1, 1, 6, dtype=torch.bool)]
)
def test_check_mask_accepts_empty_rows_in_masks_with_batch_dimensions(mask: torch.Tensor) -> None:
    # e.g. a batch of one all-padding sequence: data, not a sign error; such rows get zeros
    masks.check_mask(mask, 4, 6, "my_mask", batch_shape=(1, 3))


def test_check_mask_message_with_free_batch_and_other_ranks() -> None:
    with pytest.raises(
        ValueError, match=r"mask must be broadcastable to \(batch, heads, q_len=2, k_len=3\)"
    ):
        masks.check_mask(torch.ones(3, 2, dtype=torch.bool), 2, 3)
    with pytest.raises(ValueError, match=r"\(dim0=2, dim1=3, dim2=4, q_len=2, k_len=3\)"):
        masks.check_mask(torch.ones(3, 2, dtype=torch.bool), 2, 3, batch_shape=(2, 3, 4))
    with pytest.raises(ValueError, match=r"\(batch=5, q_len=2, k_len=3\), got \(4, 2, 3\)"):
        masks.check_mask(torch.ones(4, 2, 3, dtype=torch.bool), 2, 3, batch_shape=(5,))


@pytest.mark.parametrize(
    "mask",
    [
        ~masks.causal_mask(4, 6),  # PyTorch's sign: the last query sees nothing
        torch.zeros(4, 6, dtype=torch.bool),
        torch.ones(4, 6, dtype=torch.bool).index_fill(0, torch.tensor([2]), False),
    ],
)
def test_check_mask_refuses_a_2d_mask_that_hides_a_query_in_every_sequence(mask: torch.Tensor) -> None:
    with pytest.raises(
        ValueError,
        match=r"my_mask lets query \d attend to no key in every sequence: True means MAY attend",
    ):
        masks.check_mask(mask, 4, 6, "my_mask", batch_shape=(2, 3))


def test_check_mask_names_the_empty_query_and_accepts_data_dependent_empty_rows() -> None:
    with pytest.raises(
        ValueError,
        match=r"lets query 3 attend to no key.*It is ~causal_mask, PyTorch's sign.*masks.from_attn_mask",
    ):
        masks.check_mask(~masks.causal_mask(4, 6), 4, 6)
    # a batch dimension > 1: padded queries may attend to nothing in some sequences
    pad = masks.padding_mask(torch.tensor([4, 2]), 4)  # (2, 1, 1, 4)
    masks.check_mask(pad & pad.transpose(-1, -2), 4, 4)
    masks.check_mask(masks.padding_mask(torch.tensor([6, 0]), 6), 4, 6)
    assert not (pad & pad.transpose(-1, -2)).any(-1).all()


# A mask with a batch dimension of 1 is the same for every sequence of a batch of several: the
# review of chapter 5 found (1, 1, T, T) and (1, T, T) versions of tril(diagonal=-1), and an
# all-False (1, 1, T, T) mask, accepted silently (the refusal looked at 2-D masks only).
_STRICT = torch.ones(5, 5, dtype=torch.bool).tril(diagonal=-1)  # j < i: no diagonal


@pytest.mark.parametrize(
    ("mask", "batch_shape"),
    [
        (_STRICT[None, None], (2, 3)),  # (1, 1, T, T) on a batch of 2
        (_STRICT[None], (2, 3)),  # (1, T, T): no batch dimension at all
        (_STRICT.expand(1, 3, 5, 5), (2, 3)),  # per head, the same for every sequence
        (torch.zeros(1, 1, 5, 5, dtype=torch.bool), (2, 3)),
        (torch.zeros(1, 1, 1, 5, dtype=torch.bool), (4, 3)),  # every key hidden from every query
        (_STRICT[None], (2,)),  # (1, T, T) against (B, Tq, Tk) scores, as in AdditiveAttention
    ],
)
def test_check_mask_refuses_empty_rows_shared_by_every_sequence_of_a_batch(
    mask: torch.Tensor, batch_shape: tuple[int, ...]
) -> None:
    with pytest.raises(ValueError, match=r"lets query 0 attend to no key in every sequence"):
        masks.check_mask(mask, 5, 5, batch_shape=batch_shape)


@pytest.mark.parametrize(
    ("mask", "batch_shape"),
    [
        (_STRICT[None, None], (1, 3)),  # a batch of one: could be that sequence's data
        (_STRICT.expand(2, 1, 5, 5), (2, 3)),  # a batch dimension: built from the data
        (_STRICT[None, None], (None, None)),  # batch size unknown
    ],
)
def test_check_mask_accepts_empty_rows_that_may_come_from_the_data(
    mask: torch.Tensor, batch_shape: tuple[int | None, ...]
) -> None:
    masks.check_mask(mask, 5, 5, batch_shape=batch_shape)


def test_multi_head_attention_refuses_a_shared_rank_4_mask_without_its_diagonal() -> None:
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 5, 8)
    for mask in (_STRICT[None, None], _STRICT[None]):
        with pytest.raises(ValueError, match=r"lets query 0 attend to no key in every sequence"):
            mha(x, mask=mask)
    mha(x[:1], mask=_STRICT[None, None])  # one sequence: its padded queries may be empty


@pytest.mark.parametrize("shape", [(5, 5), (1, 1, 5, 5), (1, 5, 5)])
def test_empty_row_advice_for_a_missing_diagonal_is_not_to_invert(shape: tuple[int, ...]) -> None:
    # Inverting tril(diagonal=-1) gives triu(), which shows every query its future and passes
    # every check: the message must name the diagonal, not the sign.
    with pytest.raises(ValueError) as error:
        masks.check_mask(_STRICT.reshape(shape), 5, 5, batch_shape=(2, 3))
    message = str(error.value)
    assert "causal mask without its diagonal" in message and "masks.causal_mask" in message
    assert "Do not invert it" in message and "convert it with" not in message
    masks.check_mask(~_STRICT, 5, 5, batch_shape=(2, 3))  # why: the inverse is accepted


@pytest.mark.parametrize(
    ("mask", "advice"),
    [
        (~masks.causal_mask(5), r"It is ~causal_mask, PyTorch's sign \(True = ignore\)"),
        (torch.zeros(5, 5, dtype=torch.bool), r"It is all False"),
        (
            torch.ones(5, 5, dtype=torch.bool).index_fill(0, torch.tensor([2]), False),
            r"check which keys each query should see",
        ),
    ],
)
def test_empty_row_advice_names_what_the_mask_looks_like(mask: torch.Tensor, advice: str) -> None:
    with pytest.raises(ValueError, match=advice):
        masks.check_mask(mask, 5, 5)


# masked_softmax reads empty rows from the mask and the bias, never from the scores: the review
# of chapter 5 found a row of -inf scores gave NaN without a mask and zeros with an all-True one.
def test_masked_softmax_treats_an_overflowed_row_the_same_with_or_without_a_mask() -> None:
    scores = torch.randn(3, 4)
    scores[1] = NEG_INF  # e.g. a float16 q.k that overflowed: not a mask
    no_mask = masked_softmax(scores)
    all_true = masked_softmax(scores, mask=torch.ones(3, 4, dtype=torch.bool))
    zero_bias = masked_softmax(scores, bias=torch.zeros(3, 4))
    for weights in (no_mask, all_true, zero_bias):
        assert torch.isnan(weights[1]).all()  # loud, as torch.softmax
        torch.testing.assert_close(weights[[0, 2]], scores[[0, 2]].softmax(-1))


def test_masked_softmax_empty_rows_come_from_the_mask_or_a_minus_inf_bias() -> None:
    scores = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0] = False  # query 0: no key
    bias = torch.zeros(3, 4, dtype=torch.float64)
    bias[1] = NEG_INF  # query 1: every key forbidden by the bias
    bias[2, :2] = NEG_INF  # query 2: keys 0 and 1 forbidden by the bias, 2 and 3 by the mask
    mask[2, 2:] = False
    weights = masked_softmax(scores, mask=mask, bias=bias)
    assert torch.equal(weights, torch.zeros_like(weights))
    weights.sum().backward()
    assert torch.isfinite(scores.grad).all()
    # a float32 bias too negative for float16 becomes -inf there: that forbids the key too
    half = masked_softmax(torch.zeros(1, 3, dtype=torch.float16), bias=torch.full((1, 3), -1e30))
    assert torch.equal(half, torch.zeros_like(half))
# --- input checks that name the argument (review of chapter 5, section 6.5) -----------------


def test_padding_mask_accepts_a_0d_integer_max_len() -> None:
    lengths = torch.tensor([1, 3])
    assert torch.equal(masks.padding_mask(lengths, lengths.max()), masks.padding_mask(lengths, 3))
    with pytest.raises(ValueError, match=r"max_len must be a non-negative int"):
        masks.padding_mask(lengths, torch.tensor(3.0))


@pytest.mark.parametrize("pad_id", [None, 0.0, True])
def test_padding_mask_from_tokens_names_a_bad_pad_id(pad_id: object) -> None:
    with pytest.raises(TypeError, match=r"pad_id must be an int \(the padding token's id\)"):
        masks.padding_mask_from_tokens(torch.tensor([[5, 0]]), pad_id=pad_id)
    mask = masks.padding_mask_from_tokens(torch.tensor([[5, 0]]), pad_id=torch.tensor(0))
    assert mask[0, 0, 0].tolist() == [True, False]  # a 0-d integer tensor is an id too


def test_to_additive_refuses_an_integer_dtype() -> None:
    with pytest.raises(TypeError, match=r"dtype must be a floating dtype \(the bias holds -inf\)"):
        masks.to_additive(masks.causal_mask(3), dtype=torch.int64)


def test_combine_names_shapes_that_do_not_broadcast() -> None:
    with pytest.raises(ValueError, match=r"masks must broadcast.*\(3, 4\), \(5, 1, 1, 3\)"):
        masks.combine(torch.ones(3, 4, dtype=torch.bool), torch.ones(5, 1, 1, 3, dtype=torch.bool))
