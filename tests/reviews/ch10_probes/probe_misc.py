import torch, math, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import char_lm
from mtlib.models import GPT, GPTConfig
model, _, report = char_lm.load_checkpoint()
tok, tr, va = char_lm.splits()
# (1) the GPT's loss per 10% slice of the training text vs the bigram's held-out slice loss (cell 17)
bigram_slice = [2.54, 2.57, 2.56, 2.46, 2.56, 2.42, 2.52, 2.52, 2.45]
all_ids = torch.cat([tr, va]); cuts = [len(all_ids) * k // 10 for k in range(10)] + [len(all_ids)]; cuts[9] = len(tr)
gl = [char_lm.evaluate(model, all_ids[cuts[k]:cuts[k + 1]]) for k in range(10)]
print("(1) GPT seed 0 loss per slice (0-8 seen in training, 9 = validation):", ", ".join(f"{v:.3f}" for v in gl))
import statistics
x = bigram_slice; y = gl[:9]
mx, my = sum(x)/9, sum(y)/9
r = sum((a-mx)*(b-my) for a, b in zip(x, y)) / math.sqrt(sum((a-mx)**2 for a in x) * sum((b-my)**2 for b in y))
print(f"    correlation over the 9 training slices between bigram held-out loss and GPT loss: r = {r:.2f}; GPT train-slice range {min(y):.3f}-{max(y):.3f}, val {gl[9]:.3f}")
# (2) per-window spread of the last-position loss: standard error for exercise 4
with torch.no_grad():
    for L in (16, 64, 128):
        starts = torch.arange(0, len(va) - L - 1, L)
        print(f"(2) block_size {L}: {len(starts)} scored positions with last_only=True")
    starts = torch.arange(0, len(va) - 65, 64); xx, yy = char_lm.windows(va, starts, 64)
    l = F.cross_entropy(model(xx)[:, -1], yy[:, -1], reduction="none")
    print(f"    seed-0 model, last position: mean {l.mean():.3f}, sd {l.std():.2f}, SE {l.std()/len(l)**.5:.3f} (726 windows); at 363 windows SE ~ {l.std()/363**.5:.3f}")
    # loss by position in the window (the context effect exercise 4 asks about)
    lg = model(xx); lp = F.cross_entropy(lg.reshape(-1, 103), yy.reshape(-1), reduction="none").view(len(xx), 64).mean(0)
    print("    loss by position 0,1,2,4,8,16,32,63:", ", ".join(f"{lp[i]:.2f}" for i in (0,1,2,4,8,16,32,63)))
# (3) GPT-2's residual scaling: size of the residual stream at init as L grows
torch.manual_seed(0)
idx = torch.randint(0, 103, (8, 32))
for scaled in (True, False):
    out = []
    for L in (2, 8, 32, 128):
        g = GPT(GPTConfig(vocab_size=103, block_size=32, n_layer=L, d_model=64, num_heads=4, d_ff=256)).eval()
        if not scaled:
            for b in g.h:
                for p in (b.self_attn.out_proj, b.ff.linear2): nn.init.normal_(p.weight, std=0.02)
        with torch.no_grad():
            h0 = g.wte(idx) + g.wpe(torch.arange(32)); h = h0
            for b in g.h: h = b(h, is_causal=True)
        out.append(f"L={L}: |x0| std {h0.std():.4f}, added by blocks std {(h - h0).std():.4f}")
    print("(3)", "scaled 0.02/sqrt(2L)" if scaled else "unscaled 0.02", "|", "; ".join(out))
