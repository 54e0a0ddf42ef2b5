"""Reach of the last token's logits: formula T - 1 + L*Tm against measurement, random weights."""
import torch
torch.set_num_threads(1)
from mtlib.models.transformer_xl import TransformerXL, TransformerXLConfig

def model(L, T, Tm):
    torch.manual_seed(0)
    m = TransformerXL(TransformerXLConfig(vocab_size=11, d_model=16, num_heads=2, d_ff=20, num_layers=L, seg_len=T, mem_len=Tm)).eval()
    with torch.no_grad():
        for p in m.parameters(): p.add_(0.3 * torch.randn_like(p))
    return m

@torch.no_grad()
def last(m, ids):
    T, mems = m.config.seg_len, None
    for s in range(0, ids.shape[1], T):
        lg, mems = m(ids[:, s:s+T], mems)
    return lg[0, -1]

def reach(L, T, Tm, nseg=12):
    m = model(L, T, Tm)
    ids = torch.randint(0, 11, (1, nseg * T), generator=torch.Generator().manual_seed(1))
    base = last(m, ids); far = -1
    for k in range(1, nseg * T):
        o = ids.clone(); o[0, -1 - k] = (o[0, -1 - k] + 1) % 11
        if (last(m, o) - base).abs().max() > 0: far = k
    return far

print(f"{'L':>2} {'T':>3} {'Tm':>3} {'formula T-1+L*Tm':>17} {'measured':>9}")
for L, T, Tm in [(2, 4, 4), (3, 4, 4), (3, 4, 8), (2, 4, 6), (3, 4, 6), (2, 4, 5), (2, 4, 7), (2, 32, 48), (3, 4, 2), (2, 4, 2), (2, 4, 3)]:
    nseg = max(12, (T - 1 + L * max(Tm, T) * 2) // T + 3)
    print(f"{L:>2} {T:>3} {Tm:>3} {T - 1 + L * Tm:>17} {reach(L, T, Tm, nseg):>9}")
