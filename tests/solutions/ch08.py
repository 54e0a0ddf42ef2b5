"""Chapter 8's exercises: shifting the targets right, greedy decoding, label smoothing."""

import torch


def shift_right(labels, bos_id):
    bos = torch.full_like(labels[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, labels[:, :-1]], dim=1)  # (B, T)


def greedy_decode(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    while len(tokens) < max_len:  # max_len counts BOS
        token = int(step(tokens).argmax())  # the whole prefix, not only the last token
        tokens.append(token)
        if token == eos_id:
            break
    return tokens


def label_smoothing_loss(logits, targets, epsilon):
    log_p = logits.log_softmax(dim=-1)  # (N, V), stable for large logits
    vocab = logits.shape[-1]
    q = torch.full_like(log_p, epsilon / vocab)  # (N, V)
    q[torch.arange(len(targets)), targets] += 1 - epsilon
    return -(q * log_p).sum(dim=-1).mean()
