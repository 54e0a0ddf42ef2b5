# Is "Post-LN needs warm-up, Pre-LN does not" about the wiring, or about Adam's early steps / the LR range tried?
from common import *
t0 = time.process_time()
# (a) Pre-LN at larger peak learning rates, seed 0, with and without warm-up
for lr in (8e-2, 1.6e-1, 3.2e-1):
    no = final_loss(run(True, lr, 0, 0)); wu = final_loss(run(True, lr, WARMUP, 0))
    print(f"Pre-LN lr {lr:g}: no warm-up {no:.2f}  warm-up {wu:.2f}")
# (b) Post-LN without warm-up at lr 2e-2 with other optimisers (3 seeds)
opts = {
    "AdamW betas (0.9, 0.999) [PyTorch default]": lambda m: torch.optim.AdamW(m.parameters(), lr=LR, betas=(0.9, 0.999), weight_decay=0.0),
    "RAdam betas (0.9, 0.98)": lambda m: torch.optim.RAdam(m.parameters(), lr=LR, betas=(0.9, 0.98)),
    "AdamW + clip_norm? (see c)": None,
}
for name, fn in opts.items():
    if fn is None: continue
    print(name, "Post-LN no warm-up lr 2e-2:", [round(final_loss(run(False, LR, 0, s, optimizer_fn=fn)), 2) for s in range(3)])
# (c) Pre-LN without its final LayerNorm, and Post-LN with an extra one (is it the extra final norm?)
print("Pre-LN without final LN, no warm-up:", [round(final_loss(run(True, LR, 0, s, final_norm=False)), 2) for s in range(3)])
print("Post-LN with an extra final LN, no warm-up:", [round(final_loss(run(False, LR, 0, s, final_norm=True)), 2) for s in range(3)])
print("cpu s", time.process_time() - t0)
