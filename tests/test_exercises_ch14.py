"""Chapter 14's self-checks: correct answers pass, the typical wrong ones are named."""

import pytest
import torch

from mtlib import exercises

# ---- RMS norm, safe in half precision -------------------------------------------------------


def good_rms(x, weight, eps):
    mean_square = x.float().pow(2).mean(-1, keepdim=True)
    return (weight.float() * x.float() / torch.sqrt(mean_square + eps)).to(x.dtype)


def good_rms_rsqrt(x, weight, eps):  # a correct variant: rsqrt, the gain applied in x's dtype
    mean_square = x.float().square().mean(dim=-1, keepdim=True)
    return (x.float() * torch.rsqrt(mean_square + eps)).to(x.dtype) * weight


def good_rms_library(x, weight, eps):  # a correct variant: PyTorch's own (upcasts inside)
    return torch.nn.functional.rms_norm(x, x.shape[-1:], weight, eps)


def good_rms_double(x, weight, eps):  # a correct variant: float64 throughout
    y = x.double()
    return (weight.double() * y / y.pow(2).mean(-1, keepdim=True).add(eps).sqrt()).to(x.dtype)


def half_squares(x, weight, eps):  # the page's formula as is: x**2 in float16 is inf
    return weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def mean_square_cast_back(x, weight, eps):  # float32 squares, but the mean cast back to x's dtype
    mean_square = x.float().pow(2).mean(-1, keepdim=True).to(x.dtype)
    return weight * x * torch.rsqrt(mean_square.float() + eps).to(x.dtype)


def not_cast_back(x, weight, eps):
    mean_square = x.float().pow(2).mean(-1, keepdim=True)
    return weight * x * torch.rsqrt(mean_square + eps)  # float32 wins the type promotion


def fixed_half(x, weight, eps):
    return good_rms(x.float(), weight.float(), eps).half()


def layer_norm(x, weight, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, None, eps)


def eps_outside(x, weight, eps):
    y = x.float()
    return (weight * y / (y.pow(2).mean(-1, keepdim=True).sqrt() + eps)).to(x.dtype)


def no_eps(x, weight, eps):
    return good_rms(x, weight, 0.0)


def eps_in_sum(x, weight, eps):  # sqrt(d) x / ||x||, eps added to the sum
    y = x.float()
    return (weight * y * y.shape[-1] ** 0.5 / torch.sqrt(y.pow(2).sum(-1, keepdim=True) + eps)).to(
        x.dtype
    )


def l2(x, weight, eps):
    y = x.float()
    return (weight * y / torch.sqrt(y.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)


def no_gain(x, weight, eps):
    return good_rms(x, torch.ones_like(weight), eps)


def variance(x, weight, eps):
    y = x.float()
    return (weight * y / torch.sqrt(y.var(-1, keepdim=True) + eps)).to(x.dtype)


def test_correct_rms_norms_pass(capsys):
    for good in (good_rms, good_rms_rsqrt, good_rms_library, good_rms_double):
        exercises.check_rms_norm(good)
    assert capsys.readouterr().out.count("check_rms_norm: all 4 cases passed.") == 4


@pytest.mark.parametrize(
    "bad, match",
    [
        (half_squares, r"(?s)case 3 of 4 .*Hint: the mean square must stay in float32"),
        (mean_square_cast_back, r"(?s)case 3 of 4 .*Hint: the mean square must stay in float32"),
        (
            not_cast_back,
            r"(?s)case 3 of 4 .*got torch.float32.*Hint: the float32 \(or float64\) copy is only",
        ),
        (fixed_half, r"(?s)case 1 of 4 .*Hint: x is torch.float32 here: cast back to x.dtype"),
        (layer_norm, r"(?s)case 1 of 4 .*Hint: you subtracted the mean"),
        (eps_outside, r"(?s)case 2 of 4 .*Hint: eps goes INSIDE"),
        (no_eps, r"(?s)case 2 of 4 .*Hint: eps matters here"),
        (eps_in_sum, r"(?s)case 2 of 4 .*Hint: eps is added to the MEAN square"),
        (l2, r"(?s)case 1 of 4 .*Hint: you divided by the L2 norm"),
        (no_gain, r"(?s)case 1 of 4 .*Hint: what happened to the gain"),
        (variance, r"(?s)case 1 of 4 .*Hint: x.var subtracts the mean"),
    ],
)
def test_rms_norm_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_rms_norm(bad)


def test_rms_norm_half_case_overflows_float16():
    # the float16 case really overflows when squared in float16, and the reference does not
    x = (torch.randn(4, 16, generator=torch.Generator().manual_seed(14)) * 300).half()
    assert (
        torch.isinf(x.pow(2).mean(-1)).all()
        and torch.isfinite(good_rms(x, torch.ones(16).half(), 1e-6)).all()
    )


# ---- span corruption ------------------------------------------------------------------------


def good_spans(tokens, noise, sentinel_ids):
    inputs, targets, k = [], [], -1
    for i, (tok, n) in enumerate(zip(tokens.tolist(), noise.tolist(), strict=True)):
        starts = n and (i == 0 or not noise[i - 1])
        if starts:
            k += 1
            inputs.append(sentinel_ids[k])
            targets.append(sentinel_ids[k])
        if n:
            targets.append(tok)
        else:
            inputs.append(tok)
    return torch.tensor(inputs), torch.tensor(targets)


def good_spans_lists(tokens, noise, sentinel_ids):  # a correct variant returning lists
    inputs, targets = good_spans(tokens, noise, sentinel_ids)
    return inputs.tolist(), targets.tolist()


def per_token(tokens, noise, sentinel_ids):
    inputs, targets, k = [], [], 0
    for tok, n in zip(tokens.tolist(), noise.tolist(), strict=True):
        if n:
            inputs.append(sentinel_ids[k])
            targets += [sentinel_ids[k], tok]
            k += 1
        else:
            inputs.append(tok)
    return torch.tensor(inputs), torch.tensor(targets)


def same_sentinel(tokens, noise, sentinel_ids):
    return good_spans(tokens, noise, [sentinel_ids[0]] * len(sentinel_ids))


def no_sentinels_in_targets(tokens, noise, sentinel_ids):
    inputs, _ = good_spans(tokens, noise, sentinel_ids)
    return inputs, tokens[noise]


def noise_kept(tokens, noise, sentinel_ids):
    _, targets = good_spans(tokens, noise, sentinel_ids)
    return tokens.clone(), targets


def reversed_sentinels(tokens, noise, sentinel_ids):
    n_spans = int((noise & ~torch.cat([torch.tensor([False]), noise[:-1]])).sum())
    return good_spans(tokens, noise, list(sentinel_ids[:n_spans])[::-1])


def with_eos(tokens, noise, sentinel_ids):
    inputs, targets = good_spans(tokens, noise, sentinel_ids)
    return inputs, torch.cat([torch.as_tensor(targets), torch.tensor([1])])


def reversed_sentinel_list(tokens, noise, sentinel_ids):  # reversed(sentinel_ids): from the end
    return good_spans(tokens, noise, list(reversed(sentinel_ids)))


def last_span_lost(tokens, noise, sentinel_ids):  # a span is written out only at a clean token
    inputs, targets, k, current = [], [], 0, None
    for tok, n in zip(tokens.tolist(), noise.tolist(), strict=True):
        if n:
            if current is None:
                current = [tok]
                inputs.append(sentinel_ids[k])
            else:
                current.append(tok)
        else:
            if current is not None:
                targets += [sentinel_ids[k], *current]
                k, current = k + 1, None
            inputs.append(tok)
    return inputs, targets


def sentinel_after_span(tokens, noise, sentinel_ids):
    inputs, targets = good_spans(tokens, noise, sentinel_ids)
    out, span, current = [], [], None
    for t in targets.tolist():
        if t in sentinel_ids:
            if current is not None:
                out += [*span, current]
            current, span = t, []
        else:
            span.append(t)
    return inputs, out + [*span, current]


def spans_on_device(tokens, noise, sentinel_ids):  # a tensor made on another device than the inputs
    inputs, targets = good_spans(tokens, noise, sentinel_ids)
    return torch.cat([inputs, torch.tensor([], dtype=torch.long, device="meta")]), targets


def test_correct_span_corruptions_pass(capsys):
    exercises.check_sentinel_spans(good_spans)
    exercises.check_sentinel_spans(good_spans_lists)
    assert capsys.readouterr().out.count("check_sentinel_spans: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (per_token, r"(?s)case 1 of 3 .*Hint: one sentinel replaces a whole SPAN"),
        (same_sentinel, r"(?s)case 1 of 3 .*Hint: each span gets its OWN sentinel"),
        (
            no_sentinels_in_targets,
            r"(?s)case 1 of 3 .*Hint: the target lists each span AFTER its sentinel",
        ),
        (noise_kept, r"(?s)case 1 of 3 .*Hint: the noise tokens must leave the input"),
        (reversed_sentinels, r"(?s)case 1 of 3 .*Hint: the FIRST span gets sentinel_ids\[0\]"),
        (with_eos, r"(?s)case 1 of 3 .*Hint: no </s>"),
        (reversed_sentinel_list, r"(?s)case 1 of 3 .*Hint: the FIRST span gets sentinel_ids\[0\]"),
        (last_span_lost, r"(?s)case 2 of 3 .*Hint: your target stops before the last span"),
        (sentinel_after_span, r"(?s)case 1 of 3 .*Hint: which comes first in the target"),
        (spans_on_device, r"(?s)case 1 of 3 .*Hint: the inputs are CPU tensors"),
    ],
)
def test_span_corruption_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_sentinel_spans(bad)


def test_span_checker_agrees_with_mtlib_denoising():
    from mtlib.denoising import random_spans_noise_mask, span_corruption

    tokens = torch.arange(10, 40)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    noise = random_spans_noise_mask(30, generator=g1)
    inputs, targets = span_corruption(tokens, sentinel_ids=[99, 98, 97, 96], generator=g2)
    mine = good_spans(tokens, noise, [99, 98, 97, 96])
    assert torch.equal(mine[0], inputs) and torch.equal(mine[1], targets)


# ---- text infilling -------------------------------------------------------------------------


def good_infill(tokens, spans, mask_id):
    out, i, starts = [], 0, dict(spans)
    tokens = tokens.tolist()
    while i <= len(tokens):
        if i in starts:
            out.append(mask_id)
            i += starts[i]
        if i < len(tokens):
            out.append(tokens[i])
        i += 1
    return torch.tensor(out)


def good_infill_backwards(tokens, spans, mask_id):  # a correct variant: edit from the right
    out = tokens.tolist()
    for start, length in sorted(spans, reverse=True):
        out[start : start + length] = [mask_id]
    return out


def mask_per_token(tokens, spans, mask_id):
    out = tokens.clone()
    for start, length in spans:
        out[start : start + length] = mask_id
    return out


def deleted(tokens, spans, mask_id):
    keep = torch.ones(len(tokens), dtype=torch.bool)
    for start, length in spans:
        keep[start : start + length] = False
    return tokens[keep]


def zero_skipped(tokens, spans, mask_id):
    return good_infill(tokens, [(s, n) for s, n in spans if n > 0], mask_id)


def zero_after(tokens, spans, mask_id):
    return good_infill(tokens, [(s + 1 if n == 0 else s, n) for s, n in spans], mask_id)


def left_to_right_slices(tokens, spans, mask_id):  # the later starts drift left
    out = tokens.tolist()
    for start, length in spans:
        out[start : start + length] = [mask_id]
    return out


def zero_replaces_a_token(tokens, spans, mask_id):
    out = tokens.tolist()
    for start, length in sorted(spans, reverse=True):
        out[start : start + max(length, 1)] = [mask_id]
    return out


def span_at_end_lost(tokens, spans, mask_id):  # the loop stops at T: a span starting at T is lost
    out, i, starts = [], 0, dict(spans)
    tokens = tokens.tolist()
    while i < len(tokens):
        if i in starts:
            out.append(mask_id)
            i += starts.pop(i)
            if i >= len(tokens):
                break
        out.append(tokens[i])
        i += 1
    return out


def infill_on_device(tokens, spans, mask_id):  # torch.tensor(..., device=device) beside CPU slices
    pieces, previous = [], 0
    for start, length in spans:
        pieces += [tokens[previous:start], torch.tensor([mask_id], device="meta")]
        previous = start + length
    return torch.cat([*pieces, tokens[previous:]])


def test_correct_infillings_pass(capsys):
    exercises.check_text_infilling(good_infill)
    exercises.check_text_infilling(good_infill_backwards)
    assert capsys.readouterr().out.count("check_text_infilling: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (mask_per_token, r"(?s)case 1 of 3 .*Hint: one mask per SPAN"),
        (deleted, r"(?s)case 1 of 3 .*Hint: put a mask where each span was"),
        (zero_skipped, r"(?s)case 2 of 3 .*Hint: a span of length 0 still inserts one mask"),
        (zero_after, r"(?s)case 2 of 3 .*Hint: a span of length 0 inserts its mask BEFORE"),
        (left_to_right_slices, r"(?s)case 1 of 3 .*Hint: once an earlier span has become one mask"),
        (zero_replaces_a_token, r"(?s)case 2 of 3 .*Hint: a span of length 0 hides nothing"),
        (span_at_end_lost, r"(?s)case 3 of 3 .*Hint: a span may start at T"),
        (infill_on_device, r"(?s)case 1 of 3 .*Hint: the inputs are CPU tensors"),
    ],
)
def test_infilling_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_text_infilling(bad)


def test_stubs_and_non_functions_are_reported():
    def stub(*args):
        raise NotImplementedError

    for checker in (
        exercises.check_rms_norm,
        exercises.check_sentinel_spans,
        exercises.check_text_infilling,
    ):
        with pytest.raises(exercises.CheckFailed, match="NotImplementedError"):
            checker(stub)
        with pytest.raises(TypeError, match="takes your function"):
            checker(3)
