"""Chapter 14's self-checks: correct answers pass, the typical wrong ones are named."""

import pytest
import torch

from mtlib import exercises

# ---- RMS norm --------------------------------------------------------------------------------


def good_rms(x, weight, eps):
    return weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def good_rms_rsqrt(x, weight, eps):  # a correct variant
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps) * weight


def layer_norm(x, weight, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, None, eps)


def eps_outside(x, weight, eps):
    return weight * x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps)


def l2(x, weight, eps):
    return weight * x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def no_gain(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def variance(x, weight, eps):
    return weight * x / torch.sqrt(x.var(-1, keepdim=True) + eps)


def test_correct_rms_norms_pass(capsys):
    exercises.check_rms_norm(good_rms)
    exercises.check_rms_norm(good_rms_rsqrt)
    assert capsys.readouterr().out.count("check_rms_norm: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (layer_norm, r"(?s)case 1 of 3 .*Hint: you subtracted the mean"),
        (eps_outside, r"(?s)case 3 of 3 .*Hint: eps goes INSIDE"),
        (l2, r"(?s)case 1 of 3 .*Hint: you divided by the L2 norm"),
        (no_gain, r"(?s)case 2 of 3 .*Hint: multiply by the gain"),
        (variance, r"(?s)case 1 of 3 .*Hint: x.var subtracts the mean"),
    ],
)
def test_rms_norm_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_rms_norm(bad)


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
