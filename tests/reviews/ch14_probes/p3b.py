# Probe 3b: the fair context-free bar for the held-out windows: their tokens scored by the CORPUS frequencies.
import math, torch
torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
v = tp.vocab()
stream = tp.pretraining_stream()
freq = (torch.bincount(stream, minlength=v.size).float() + 0.1); freq /= freq.sum()
for name, sents in (("held-out", tp.downstream_sentences()[1]), ("fill training", tp.downstream_sentences()[0])):
    ids = torch.tensor(v.encode(tp.words_of(" ".join(sents))))
    X = -freq.log()[ids].mean().item()
    print(f"{name} sentences: {ids.numel()} tokens, cross-entropy under corpus frequencies {X:.2f}; yardstick (5X + ln4)/8 = {(5*X + math.log(4))/8:.2f}")
