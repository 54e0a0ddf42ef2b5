"""Probe (issue 25, decode step): where mtlib's one-token self-attention spends its time against
nn.MultiheadAttention. Best of 7 x 2000 calls, microseconds per call; 2 threads, inference mode.

forward: mtlib MultiHeadAttention (checks kept); call_impl: .forward() without nn.Module.__call__;
body: the same steps without the input checks; bare: three F.linear + F.sdpa + one F.linear, no
checks; lin4: the four 512x512 linears alone; mha: nn.MultiheadAttention (packed 1536x512 in-proj).
Run: python tests/reviews/ch12_probes/p13_decode_step.py > tests/reviews/ch12_probes/p13_decode_step.log
"""
import timeit

import torch
import torch.nn.functional as F
from torch import nn

import mtlib.attention as A

torch.set_num_threads(2)
ref = nn.MultiheadAttention(512, 8, batch_first=True).eval()
m = A.MultiHeadAttention.from_torch(ref).eval()
x = torch.randn(1, 1, 512)
def body():
    q = m._split_heads(m.q_proj(x))
    k, v = m._keys_values(x, x, None, 0)
    out, w = m._attend(q, k, v, None, None, False, False)
    return m.out_proj(m._merge_heads(out))
def bare():
    q = F.linear(x, m.q_proj.weight, m.q_proj.bias).view(1, 1, 8, 64).transpose(1, 2)
    k = F.linear(x, m.k_proj.weight, m.k_proj.bias).view(1, 1, 8, 64).transpose(1, 2)
    v = F.linear(x, m.v_proj.weight, m.v_proj.bias).view(1, 1, 8, 64).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v)
    return F.linear(o.transpose(1, 2).reshape(1, 1, 512), m.out_proj.weight, m.out_proj.bias)
def lin4():
    F.linear(x, m.q_proj.weight, m.q_proj.bias); F.linear(x, m.k_proj.weight, m.k_proj.bias); F.linear(x, m.v_proj.weight, m.v_proj.bias)
    return F.linear(x, m.out_proj.weight, m.out_proj.bias)
tests = {"forward": lambda: m(x), "call_impl": lambda: m.forward(x), "body": body, "bare": bare, "lin4": lin4, "mha": lambda: ref(x, x, x, need_weights=False)}
with torch.inference_mode():
    for _ in range(3):
        print({k: round(min(timeit.repeat(f, number=2000, repeat=7)) / 2000 * 1e6, 1) for k, f in tests.items()})
