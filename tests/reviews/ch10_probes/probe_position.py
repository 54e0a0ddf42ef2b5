import torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import char_lm
model, _, _ = char_lm.load_checkpoint()
tok, tr, va = char_lm.splits()
with torch.no_grad():
    starts = torch.arange(0, len(va) - 65, 8)  # overlapping windows, stride 8: 8x the windows
    tot = torch.zeros(64); n = 0
    for ch in starts.split(512):
        x, y = char_lm.windows(va, ch, 64)
        tot += F.cross_entropy(model(x).reshape(-1, 103), y.reshape(-1), reduction="none").view(len(x), 64).sum(0); n += len(x)
    lp = tot / n
for a, b in ((0, 1), (1, 4), (4, 8), (8, 16), (16, 32), (32, 48), (48, 64)):
    print(f"positions {a}-{b-1}: {lp[a:b].mean():.3f}")
print("windows", n)
