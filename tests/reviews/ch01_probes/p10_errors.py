# Cells 36-40 on the native-kernel model of the same seed: what a reader on an AVX-512 CPU sees.
import torch
from defs import *
def error_kind(p, t):
    k = (p != t).nonzero()[0].item()
    if torch.equal(p[k + 1:], t[k + 1:]): return "one digit replaced"
    if torch.equal(p[k + 1:], t[k:-1]): return "one digit inserted"
    if torch.equal(p[k:-1], t[k + 1:]): return "one digit dropped"
    return "other"
for tag in ("with_attention_0_pinned", "with_attention_0"):
    model = build("with attention"); model.load_state_dict(torch.load(f"ckpt/{tag}.pt")); model.eval()
    batch = sequence_task(500, 16, 16, kind="reverse", generator=torch.Generator().manual_seed(321))
    predicted, weights = model.greedy(batch.src, batch.lengths, 16, 1)
    steps, mirrors = torch.arange(16), torch.arange(15, -1, -1)
    by_step = weights[:, steps, mirrors].mean(0)
    target = batch.tgt[:, 1:17]
    per_token = (predicted == target).float().mean(1)
    wrong = (per_token < 1).nonzero().flatten().tolist()
    kinds = {}
    for i in wrong: kinds.setdefault(error_kind(predicted[i], target[i]), []).append(i)
    print(f"[{tag}] mirror mean {weights[:, steps, mirrors].mean():.2f}, by step min {by_step.min():.2f} max {by_step.max():.2f}")
    print(f"  {len(wrong)} wrong of 500:", {k: len(v) for k, v in kinds.items()})
    # chance baseline for 'dropped digit sits in a run': for a drop, t[k+1] != t[k] always, so only t[k-1] counts
    dropped = kinds.get("one digit dropped", [])
    both = sum(int(target[i][(predicted[i] != target[i]).nonzero()[0].item() + 1] == target[i][(predicted[i] != target[i]).nonzero()[0].item()]) for i in dropped if (predicted[i] != target[i]).nonzero()[0].item() < 15)
    print(f"  drops whose next target digit equals the dropped one (can it ever happen?): {both} of {len(dropped)}")
    if dropped:
        i = min(dropped, key=lambda i: per_token[i].item())
        print("  example source:    ", decode_symbols(batch.src[i])); print("  example target:    ", decode_symbols(target[i])); print("  example prediction:", decode_symbols(predicted[i]))
