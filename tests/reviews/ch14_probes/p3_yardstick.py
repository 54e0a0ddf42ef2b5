# Probe 3: cell 38's yardstick. (a) the format is not free: the split of 5 noise tokens into 2 spans is
# uniform over 4 choices, which a context-free model must pay for; (b) the pretraining loss printed is a
# TRAINING loss after ~10 passes; measure the pretrained model on windows it never saw.
import math, torch
torch.set_num_threads(1)
from collections import Counter
from mtlib import denoising
from mtlib.experiments import t5_pretrain as tp
v = tp.vocab()
# (a) window 32 -> noise tokens, spans, and the distribution of the first span's length
lens = Counter()
for s in range(2000):
    m = denoising.random_spans_noise_mask(32, generator=torch.Generator().manual_seed(s))
    edges = torch.diff(m.long(), prepend=torch.tensor([0]), append=torch.tensor([0]))
    L = ((edges == -1).nonzero().flatten() - (edges == 1).nonzero().flatten()).tolist()
    lens[tuple(L)] += 1
print("span lengths of a 32-token window over 2000 draws:", dict(sorted(lens.items())))
stream = tp.pretraining_stream()
print("pretraining stream:", stream.numel(), "tokens; 600 x 64 x 32 =", 600 * 64 * 32, "window tokens =", round(600*64*32/stream.numel(), 1), "passes")
freq = torch.bincount(stream, minlength=v.size).float() / len(stream)
H = -(freq[freq > 0] * freq[freq > 0].log()).sum().item()
fmt = math.log(4)  # nats per target for choosing where the second sentinel goes
print(f"chapter's yardstick 5/8 x {H:.2f} = {5/8*H:.2f}; with the span split paid ({fmt:.3f} nats per 8-token target): {(5*H + fmt)/8:.2f}")
# (b) loss on windows from the pretraining stream (seen) and from the held-out sentences (never seen)
pre = tp.load_pretrain()[0]["pretrained"].eval()
@torch.no_grad()
def span_loss(seq, n, seed):
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, seq.numel() - 32, (n,), generator=g)
    pairs = []
    for st in starts.tolist():
        i, t = denoising.span_corruption(seq[st:st+32], sentinel_ids=v.sentinels, generator=g)
        pairs.append((i.tolist(), t.tolist()))
    return tp.loss_fn(pre, tp.make_batch(pairs)).item()
held = torch.tensor(v.encode(tp.words_of(" ".join(tp.downstream_sentences()[1]))))
train_s = torch.tensor(v.encode(tp.words_of(" ".join(tp.downstream_sentences()[0]))))
fh = torch.bincount(held, minlength=v.size).float() / len(held); Hh = -(fh[fh > 0] * fh[fh > 0].log()).sum().item()
print(f"pretrained seed 0, span-corruption loss on 512 windows: pretraining stream {span_loss(stream, 512, 0):.2f}; "
      f"fill-task training sentences (in the stream) {span_loss(train_s, 512, 0):.2f}; held-out sentences (removed) {span_loss(held, 512, 0):.2f} nats/token")
print(f"(unigram entropy of the held-out sentences' own tokens, an optimistic bar for them: {Hh:.2f}; yardstick {(5*Hh+fmt)/8:.2f})")
