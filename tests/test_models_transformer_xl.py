"""Transformer-XL (mtlib.models.transformer_xl): the rel-shift trick, recurrence equal to a banded
mask, no gradient through memories, shift invariance of the position term, bad inputs."""

import pytest
import torch

from mtlib.masks import causal_mask
from mtlib.models.transformer_xl import (
    RelMultiHeadAttention,
    TransformerXL,
    TransformerXLConfig,
    rel_shift,
)
from mtlib.positional import sinusoidal_table


def _model(**overrides) -> TransformerXL:
    fields = dict(vocab_size=13, d_model=18, num_heads=3, d_ff=22, num_layers=2, seg_len=5,
                  mem_len=7, dropout=0.0)  # fmt: skip
    torch.manual_seed(0)
    model = TransformerXL(TransformerXLConfig(**{**fields, **overrides})).eval()
    with torch.no_grad():  # u and v start at zero: make them (and everything) non-trivial
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def test_rel_shift_equals_an_explicit_gather():
    torch.manual_seed(0)
    b, h, t, m = 2, 3, 5, 7
    k = m + t
    x = torch.randn(b, h, t, k)  # column c = distance k - 1 - c
    out = rel_shift(x)
    for i in range(t):
        for j in range(i + m + 1):  # the causal keys
            distance = i + m - j
            assert out[:, :, i, j].equal(x[:, :, i, k - 1 - distance])


def test_position_scores_are_q_plus_v_against_r_of_i_minus_j():
    torch.manual_seed(1)
    d, h, t, m = 18, 3, 4, 6
    k = m + t
    attn = RelMultiHeadAttention(d, h)
    with torch.no_grad():
        attn.v.normal_()
    q = torch.randn(2, h, t, d // h)  # (B, H, T, Dh)
    table = sinusoidal_table(k, d).float()  # row p = distance p
    got = attn.position_scores(q, table.flip(0))  # (B, H, T, K)
    w = attn.r_proj.weight.T.view(d, h, d // h)  # (d, H, Dh)
    for i in range(t):
        for j in range(i + m + 1):
            r = torch.einsum("d,dhe->he", table[i + m - j], w)  # (H, Dh) R[i - j] W_R
            want = ((q[:, :, i] + attn.v) * r).sum(-1)  # (B, H)
            torch.testing.assert_close(got[:, :, i, j], want, atol=1e-5, rtol=1e-5)


def test_position_term_depends_only_on_i_minus_j():
    torch.manual_seed(2)
    attn = RelMultiHeadAttention(18, 3)
    t, m = 5, 7
    q = torch.randn(1, 3, 1, 6).expand(1, 3, t, 6)  # the same query at every position
    s = attn.position_scores(q, sinusoidal_table(m + t, 18).float().flip(0))  # (1, 3, T, K)
    for i in range(t - 1):
        for j in range(i + m + 1):  # shifting query and key by one keeps the score
            torch.testing.assert_close(s[..., i + 1, j + 1], s[..., i, j])
    assert (s[..., 0, 0] - s[..., 0, m]).abs().max() > 1e-3  # but distance matters


@pytest.mark.parametrize("batch", [1, 3])
def test_two_segments_with_memory_equal_one_pass_with_a_banded_mask(batch):
    # one layer, mem_len == seg_len: segment 2 attends to segment 1 (its memory) and itself
    seg = 5
    model = _model(num_layers=1, mem_len=seg)
    idx = torch.randint(0, 13, (batch, 2 * seg), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        first, mems = model(idx[:, :seg])
        second, _ = model(idx[:, seg:], mems)
        whole = _model(num_layers=1, seg_len=2 * seg, mem_len=0)
        whole.load_state_dict(model.state_dict())
        band = torch.zeros(2 * seg, 2 * seg, dtype=torch.bool)
        for i in range(2 * seg):  # its own segment up to i, and all of the previous segment
            band[i, max(0, (i // seg - 1) * seg) : i + 1] = True
        full, _ = whole(idx, mask=band)
    torch.testing.assert_close(torch.cat([first, second], 1), full, atol=1e-5, rtol=1e-5)
    assert (second - whole(idx[:, seg:])[0]).abs().max() > 1e-3  # the memory changed segment 2


def test_banded_mask_with_batch_equal_to_the_length_is_not_refused_as_ambiguous():
    # three segments read at once under chapter 15's band (not causal_mask, rows unequal) by a
    # batch of 15 sequences of 15 tokens: a 2-D mask with batch == T is refused by the attention
    # functions as ambiguous, but the model's mask is (T, M + T) by definition
    seg, n = 5, 3
    model = _model(num_layers=1, mem_len=seg)
    idx = torch.randint(0, 13, (n * seg, n * seg), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        outs, mems = [], None
        for s in range(n):
            logits, mems = model(idx[:, s * seg : (s + 1) * seg], mems)
            outs.append(logits)
        whole = _model(num_layers=1, seg_len=n * seg, mem_len=0)
        whole.load_state_dict(model.state_dict())
        band = torch.zeros(n * seg, n * seg, dtype=torch.bool)
        for i in range(n * seg):
            band[i, max(0, (i // seg - 1) * seg) : i + 1] = True
        assert not torch.equal(band, causal_mask(n * seg))
        full, _ = whole(idx, mask=band)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)


def test_memories_carry_no_gradient():
    model = _model().train()
    idx = torch.randint(0, 13, (2, 10), generator=torch.Generator().manual_seed(4))
    _, mems = model(idx[:, :5])
    assert all(not m.requires_grad and m.grad_fn is None for m in mems)
    logits, _ = model(idx[:, 5:], mems)
    logits.square().mean().backward()
    with_mems = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with torch.no_grad():
        _, frozen = model(idx[:, :5])
    logits, _ = model(idx[:, 5:], frozen)
    logits.square().mean().backward()
    for a, p in zip(with_mems, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad)  # the first segment's graph took no gradient


def test_memory_length_and_reach_over_three_segments():
    model = _model(seg_len=5, mem_len=7)  # seg_len != mem_len
    idx = torch.randint(0, 13, (3, 15), generator=torch.Generator().manual_seed(5))
    mems, lengths, outs = None, [], []
    with torch.no_grad():
        for s in range(3):
            logits, mems = model(idx[:, 5 * s : 5 * s + 5], mems)
            lengths.append([m.shape[1] for m in mems])
            outs.append(logits)
        assert outs[0].shape == (3, 5, 13)
        assert lengths == [[5, 5], [7, 7], [7, 7]]
        # the memory holds the last 7 inputs of each layer: layer 0's are the embeddings
        torch.testing.assert_close(mems[0], model.tok_emb(idx[:, 8:15]))
        # a token two segments back still changes segment 3 (through memory)
        changed = idx.clone()
        changed[:, 3] = (changed[:, 3] + 1) % 13
        m2 = None
        for s in range(3):
            logits2, m2 = model(changed[:, 5 * s : 5 * s + 5], m2)
    assert (logits2 - outs[2]).abs().max() > 1e-4


def test_causal_within_the_segment():
    model = _model()
    idx = torch.randint(0, 13, (2, 5), generator=torch.Generator().manual_seed(6))
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 13
    with torch.no_grad():
        a, _ = model(idx)
        b, _ = model(changed)
    assert (a[:, :-1] - b[:, :-1]).abs().max() == 0
    assert (a[:, -1] - b[:, -1]).abs().max() > 1e-4


def test_no_memory_means_segments_are_independent():
    model = _model(mem_len=0)
    idx = torch.randint(0, 13, (2, 10), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        _, mems = model(idx[:, :5])
        second, _ = model(idx[:, 5:], mems)
        alone, _ = model(idx[:, 5:])
    assert [m.shape[1] for m in mems] == [0, 0]
    assert second.equal(alone)


def test_absolute_positions_repeat_in_every_segment():
    model = _model(positions="absolute", mem_len=5)
    seg = torch.randint(0, 13, (1, 5), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        first, mems = model(seg)
        second, _ = model(seg, mems)
    # layer 0's memory is token + position: the same as the input of the repeated segment
    torch.testing.assert_close(mems[0], model.tok_emb(seg) + model.table[:5])
    assert first.shape == second.shape == (1, 5, 13)
    assert (first - second).abs().max() > 1e-4  # the memory is read


def test_bad_inputs_name_the_argument():
    model = _model()
    idx = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(TypeError, match="idx"):
        model(idx.float())
    with pytest.raises(ValueError, match="seg_len"):
        model(torch.zeros(2, 6, dtype=torch.long))
    with pytest.raises(ValueError, match=r"idx ids must lie in \[0, 13\)"):
        model(idx + 13)
    with pytest.raises(ValueError, match="mems must be a list of 2"):
        model(idx, model.init_mems(2)[:1])
    with pytest.raises(ValueError, match="mems"):
        model(idx, [torch.zeros(2, 3, 18), torch.zeros(2, 3, 17)])
    with pytest.raises(ValueError, match="mem_len=7"):
        model(idx, [torch.zeros(2, 8, 18)] * 2)
    with pytest.raises(ValueError, match="mask"):
        model(idx, mask=torch.ones(5, 6, dtype=torch.bool))
    for bad, name in [
        (dict(positions="rope"), "positions"),
        (dict(d_model=17, num_heads=1), "d_model"),
        (dict(num_heads=4), "num_heads"),
        (dict(mem_len=-1), "mem_len"),
        (dict(seg_len=0), "seg_len"),
        (dict(dropout=1.0), "dropout"),
    ]:
        with pytest.raises(ValueError, match=name):
            _model(**bad)


def test_attention_weights_are_the_ones_forward_uses() -> None:
    """``attention_weights`` returns what ``forward`` mixes the values with (relative and absolute)."""
    torch.manual_seed(3)
    attn = RelMultiHeadAttention(18, 3).eval()
    with torch.no_grad():
        attn.u.normal_(), attn.v.normal_()
    tm, t = 7, 5
    context = torch.randn(2, tm + t, 18)  # (B, K, d): memory then segment
    x = context[:, tm:]
    mask = torch.ones(t, tm + t, dtype=torch.bool).tril(diagonal=tm)  # (T, K)
    for r in (torch.randn(tm + t, 18), None):
        with torch.no_grad():
            w = attn.attention_weights(x, context, r=r, mask=mask)  # (B, H, T, K)
            v = attn.v_proj(context).view(2, tm + t, 3, 6).transpose(1, 2)  # (B, H, K, Dh)
            mixed = attn.out_proj((w @ v).transpose(1, 2).reshape(2, t, 18))  # (B, T, d)
            out = attn(x, context, r=r, mask=mask)
        assert w.shape == (2, 3, t, tm + t)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, t))
        assert float(w.masked_select(~mask).abs().max()) == 0.0  # nothing on masked keys
        torch.testing.assert_close(mixed, out, atol=1e-5, rtol=0)


def test_a_mask_that_sees_later_keys_is_refused_naming_mask() -> None:
    """Above the causal line the rel-shift's scores are another row's distances (junk) and a
    language model reads the answer: an all-True mask ran silently before (review of ch. 15)."""
    torch.manual_seed(0)
    model = _model().eval()
    idx = torch.randint(0, 13, (2, 5))  # (B, T)
    mems = [torch.randn(2, 3, 18) for _ in range(2)]  # M = 3 memory slots per layer
    t, k = 5, 8
    allowed = causal_mask(t, k)  # (T, K): all memory + causal
    band = allowed.clone()
    band[:, 0] = False  # without the oldest memory slot: a band, fewer keys than causal
    with torch.no_grad():
        model(idx, mems, mask=allowed)
        model(idx, mems, mask=band)  # a band (a subset of the causal keys) stays legal
        for leak in (torch.ones(t, k, dtype=torch.bool), allowed.clone()):
            leak[1, k - t + 2] = True  # query 1 sees the key two positions after its own
            with pytest.raises(ValueError, match=r"mask lets a query attend keys after"):
                model(idx, mems, mask=leak)
    attn = RelMultiHeadAttention(18, 3).eval()
    context, r = torch.randn(2, k, 18), torch.randn(k, 18)  # (B, K, d), (K, d)
    full = torch.ones(1, 1, t, k, dtype=torch.bool)
    with torch.no_grad(), pytest.raises(ValueError, match="mask lets a query"):
        attn(context[:, k - t :], context, r=r, mask=full)
    with torch.no_grad():  # without the position term nothing is junk: the layer allows it
        attn(context[:, k - t :], context, r=None, mask=full)


def _reach(model: TransformerXL, n_segments: int) -> int:
    """Largest k such that changing the token k places before the last one changes its logits."""
    t = model.config.seg_len
    idx = torch.randint(0, 13, (1, n_segments * t), generator=torch.Generator().manual_seed(6))

    def last(ids: torch.Tensor) -> torch.Tensor:
        mems = None
        for s in range(0, ids.shape[1], t):
            logits, mems = model(ids[:, s : s + t], mems)
        return logits[0, -1]

    with torch.no_grad():
        base, reach = last(idx), 0
        for k in range(1, idx.shape[1]):
            other = idx.clone()
            other[0, -1 - k] = (other[0, -1 - k] + 1) % 13
            if (last(other) - base).abs().max() > 0:
                reach = k
    return reach


@pytest.mark.parametrize(
    ("layers", "seg", "mem", "expected"),
    [(2, 4, 4, 11), (2, 4, 6, 17), (3, 4, 6, 25), (2, 4, 5, 16), (3, 4, 2, 13), (2, 3, 7, 18)],
)
def test_reach_is_t_minus_1_plus_t_mem_plus_whole_segments_per_further_layer(
    layers: int, seg: int, mem: int, expected: int
) -> None:
    """Reach = T - 1 + T_mem + (L - 1) T ceil(T_mem / T); T - 1 + L T_mem only when T divides T_mem
    (review of ch. 15: T=4, T_mem=6, L=2 reaches 17, not 15)."""
    formula = seg - 1 + mem + (layers - 1) * seg * -(-mem // seg)
    assert formula == expected
    model = _model(num_layers=layers, seg_len=seg, mem_len=mem)
    assert _reach(model, n_segments=expected // seg + 3) == expected


def test_mems_of_another_dtype_or_device_are_refused_naming_mems() -> None:
    """float32 memories into a float64 model failed deep in LayerNorm without naming ``mems``."""
    model = _model()
    idx = torch.randint(0, 13, (3, 4), generator=torch.Generator().manual_seed(7))  # B=3, T=4
    good = [torch.zeros(3, 6, 18), torch.zeros(3, 6, 18)]  # M = 6 != T
    with torch.no_grad():
        model(idx, good)
        with pytest.raises(
            ValueError, match=r"mems\[1\] must have the model's dtype torch.float32"
        ):
            model(idx, [good[0], good[1].double()])
        with pytest.raises(
            ValueError, match=r"mems\[0\] must have the model's dtype .* device cpu"
        ):
            model(idx, [torch.zeros(3, 6, 18, device="meta"), good[1]])
        model.double()
        with pytest.raises(
            ValueError, match=r"mems\[0\] must have the model's dtype torch.float64"
        ):
            model(idx, good)
        model(idx, [m.double() for m in good])
