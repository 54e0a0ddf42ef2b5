# Probe cell 25's claim "the model is correct for any batch": a mixed-length batch vs each sequence alone.
import torch
from defs import *
torch.manual_seed(0)
for att in (True, False):
    m = Seq2Seq(VOCAB, use_attention=att).eval()
    b = sequence_task(6, 2, 9, kind="reverse", generator=torch.Generator().manual_seed(5))
    logits, _ = m(b.src, b.lengths, b.tgt[:, :-1])
    err = 0.0
    for i in range(6):
        L = int(b.lengths[i])
        li, _ = m(b.src[i:i+1, :L], b.lengths[i:i+1], b.tgt[i:i+1, :L+1])
        err = max(err, (li[0] - logits[i, :L+1]).abs().max().item())
    g, _ = m.greedy(b.src, b.lengths, 9, 1)
    gerr = 0
    for i in range(6):
        L = int(b.lengths[i]); gi, _ = m.greedy(b.src[i:i+1, :L], b.lengths[i:i+1], 9, 1)
        gerr += int(not torch.equal(gi[0], g[i]))
    print(f"attention={att}: teacher-forced logits, mixed batch vs alone, max diff {err:.2e}; greedy outputs differing: {gerr}/6")
# Does the left-padded or unsorted case matter? src padded on the right only (sequence_task). A batch with lengths.to('cuda')? n/a on CPU.
