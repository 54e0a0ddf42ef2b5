# Probe: exercise 4 asks to swap the feature map for relu; the chapter's linear_attention has no
# epsilon in its denominator. What happens to a learner who swaps F.elu(x) + 1 for F.relu(x)?
import torch, torch.nn.functional as F
from nbcode import ns
V, T, LAG, D = ns['V'], ns['T'], ns['LAG'], ns['D']
src_ok = ns['linear_attention']
def relu_linear_attention(q, k, v, causal=False):
    q, k = F.relu(q), F.relu(k)
    scores = (q @ k.transpose(-2, -1)).tril()
    return (scores @ v) / scores.sum(dim=-1, keepdim=True)
ns['linear_attention'] = relu_linear_attention  # what the learner edits: the global the model calls
torch.manual_seed(0); gen = torch.Generator().manual_seed(0)
model = ns['LagModel'](linear=True); opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(1, 121):
    x, y = ns['lag_batch'](32, gen)
    out = model(x)
    loss = F.cross_entropy(out[:, LAG:].reshape(-1, V), y[:, LAG:].reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    if step in (1, 2, 5, 20, 120) or not torch.isfinite(loss):
        bad = (~torch.isfinite(out)).any(-1).float().mean().item()
        print(f"step {step}: loss {loss.item():.3f}, fraction of positions with NaN output {bad:.3f}, "
              f"any NaN parameter: {any(not torch.isfinite(p).all() for p in model.parameters())}")
        if not torch.isfinite(loss): break
