"""Chapter 10's exercises: top-k and min-p probabilities, the causal LM loss."""

import torch


def top_k_probs(logits, k):
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit
    return torch.softmax(logits.masked_fill(logits < kth, float("-inf")), dim=-1)


def min_p_probs(logits, p_min):
    # p >= p_min * p_max  <=>  logit - max logit >= log(p_min): no exp, nothing to overflow
    threshold = logits.amax(dim=-1, keepdim=True) + logits.new_tensor(p_min).log()  # (..., 1)
    return torch.softmax(logits.masked_fill(logits < threshold, float("-inf")), dim=-1)


def causal_lm_loss(logits, idx):
    vocab = logits.shape[-1]
    predictions = logits[:, :-1].reshape(-1, vocab)  # position t predicts token t + 1
    targets = idx[:, 1:].reshape(-1)
    return torch.nn.functional.cross_entropy(predictions, targets)
