# Probe cells 3-5: the gradient claim, the "no gradient path" demo, and vanishing gradients as tau -> 0.
import torch
torch.set_num_threads(1)
keys = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.6, 0.0]])
values = torch.tensor([[10.0, 0.0], [0.0, 10.0], [-10.0, 0.0], [5.0, 5.0]])
query = torch.tensor([0.9, 0.5, 0.1])
def soft_lookup(query, keys, values, temperature=1.0):
    weights = torch.softmax(query @ keys.T / temperature, dim=-1)
    return weights @ values, weights
def hard_lookup(query, keys, values):
    return values[torch.argmax(query @ keys.T)]
for tau in (1.0, 0.1, 0.01, 0.001):
    q = query.clone().requires_grad_()
    soft_lookup(q, keys, values, tau)[0].sum().backward()
    print(f"tau={tau:<6} |d out / d q| = {q.grad.norm():.3g}")
# The cell's demo: requires_grad of the hard output is False only because `values` has no grad.
v = values.clone().requires_grad_()
qh = query.clone().requires_grad_()
out = hard_lookup(qh, keys, v)
print("hard lookup with values.requires_grad: output requires_grad =", out.requires_grad)
out.sum().backward()
print("  grad to query:", qh.grad, " grad to values:", v.grad.tolist())
# naive softmax (what a reader writes) at tau=0.001 overflows? scores/tau = 900
s = query @ keys.T / 0.001
print("naive exp at tau=0.001:", torch.exp(s), "-> naive softmax", torch.exp(s) / torch.exp(s).sum())
# half precision: torch.softmax in float16 at tau = 0.001
print("fp16 torch.softmax at tau=0.001:", torch.softmax((query @ keys.T).half() / 0.001, -1))
print("fp16 scores/tau:", ((query @ keys.T).half() / 0.001))
print("-- objective out[0] (first coordinate), not out.sum() whose key sums are 10,10,-10,10:")
for tau in (1.0, 0.3, 0.1, 0.03, 0.01, 0.001):
    q = query.clone().requires_grad_()
    soft_lookup(q, keys, values, tau)[0][0].backward()
    print(f"tau={tau:<6} |d out[0] / d q| = {q.grad.norm():.3g}")
