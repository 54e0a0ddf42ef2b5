"""Chapter 14's exercises: RMS norm, span corruption for a given mask, text infilling for given spans."""

import torch


def rms_norm(x, weight, eps):
    return weight * x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)  # no mean, no bias


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
