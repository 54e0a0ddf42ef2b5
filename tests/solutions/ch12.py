"""Chapter 12's exercises: the online-softmax merge of two blocks, a KV cache growing in place."""

import torch


def online_softmax(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b)  # (..., 1): the running max of both blocks
    ref = m.masked_fill(m == float("-inf"), 0.0)  # no key seen in either block: avoid -inf - -inf
    a, b = torch.exp(m_a - ref), torch.exp(m_b - ref)  # each block's rescale, at most 1
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b


def kv_cache_append(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:  # full: a buffer twice as long, the old positions copied once
        bigger = buffer.new_empty(*buffer.shape[:2], 2 * end, buffer.shape[3])
        bigger[:, :, :length] = buffer[:, :, :length]
        buffer = bigger
    buffer[:, :, length:end] = new  # written in place
    return buffer
