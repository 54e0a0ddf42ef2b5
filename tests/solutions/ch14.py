"""Chapter 14's exercises: half-precision RMS norm, span corruption for a given mask, text infilling."""

import torch


def rms_norm(x, weight, eps):
    mean_square = x.float().pow(2).mean(dim=-1, keepdim=True)  # in float32: x**2 overflows float16
    normed = weight.float() * x.float() / torch.sqrt(mean_square + eps)  # no mean, no bias
    return normed.to(x.dtype)  # back to x's dtype


def sentinel_spans(tokens, noise, sentinel_ids):
    inputs, targets, span = [], [], -1
    for i, (token, is_noise) in enumerate(zip(tokens.tolist(), noise.tolist(), strict=True)):
        if is_noise and (i == 0 or not noise[i - 1]):  # the first token of a span
            span += 1
            inputs.append(sentinel_ids[span])
            targets.append(sentinel_ids[span])
        (targets if is_noise else inputs).append(token)
    return torch.tensor(inputs), torch.tensor(targets)


def text_infilling(tokens, spans, mask_id):
    out = tokens.tolist()
    for start, length in sorted(spans, reverse=True):  # from the right: earlier starts stay valid
        out[start : start + length] = [mask_id]  # one mask per span, even of length 0
    return torch.tensor(out)
