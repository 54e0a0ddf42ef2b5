# Does a source EOS (standard in seq2seq, absent here) make length easier to read? 100 live steps, 2 seeds.
import torch, time
torch.set_num_threads(1)
from mtlib import train
from mtlib.experiments import translation as tr
from mtlib.transformer import Transformer
from mtlib.data import EOS, PAD
from mtlib.data.translation import NumberBatch
def add_eos(b):
    src = torch.cat([b.src, torch.full((b.src.shape[0], 1), PAD)], 1)
    n = (b.src != PAD).sum(1)
    src[torch.arange(len(n)), n] = EOS
    return NumberBatch(b.numbers, src, b.tgt)
S = tr.TrainSettings(); h = tr.heldout_sample(); he = add_eos(h)
for seed in (0, 1):
    for name, wrap in (("digits only (chapter)", lambda b: b), ("digits + source EOS", add_eos)):
        t = time.process_time()
        torch.manual_seed(seed); m = Transformer(tr.model_config())
        stream = tr.batch_stream(S, seed)
        train.fit(m, tr.buggy_loss("none", label_smoothing=S.label_smoothing), lambda s: wrap(stream(s)), steps=100,
                  lr=S.lr, schedule=train.warmup_cosine(S.warmup, S.steps), clip_norm=S.clip_norm, seed=seed)
        m.eval(); test = h if wrap(h) is h else he
        pred = tr.decode(m, test.src); r = tr.score(pred, test)
        wrong = ~(pred[:, :h.tgt.shape[1]] == h.tgt).all(1)
        per = {d: round(wrong[torch.tensor([len(str(n)) == d for n in h.numbers.tolist()])].float().mean().item(), 2) for d in range(3, 7)}
        print(f"seed {seed} {name:>22}: exact {r['exact']:.3f} token {r['token']:.3f}; wrong by length {per} ({time.process_time()-t:.0f} s)", flush=True)
