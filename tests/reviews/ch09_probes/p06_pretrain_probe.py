# Does the [MASK] accuracy plateau come from position information drowned by the (tied, growing) token embeddings?
# Same recipe as bm.pretrain (seed 0), 600 steps with the schedule scaled to 600; variant: pos_embed init std 0.2.
from common import *
import sys
from mtlib import train
from mtlib.models import BERTForMaskedLM, mask_tokens
from mtlib.models.bert import IGNORE_INDEX
from mtlib.utils import seed_everything
variant = sys.argv[1]; steps = int(sys.argv[2])
t0 = time.process_time()
_, vocab, report = bm.load_checkpoint()
train_text, held_text = bm.corpus()
train_ids = vocab.encode(train_text)
windows = bm.mlm_windows(train_ids, vocab); held = bm.mlm_windows(vocab.encode(held_text), vocab)
s = bm.PretrainSettings(); seed = 0
if variant == "preln":
    import dataclasses
    from mtlib.models.bert import BERTConfig
    _orig = BERTConfig.block_config
    BERTConfig.block_config = lambda self: dataclasses.replace(_orig(self), norm_first=True)
if variant == "lr5e-4":
    s.lr = 5e-4
seed_everything(seed)
model = BERTForMaskedLM(bm.model_config(vocab.size, pad_id=vocab.pad, max_position=32))
if variant == "pos02":
    torch.nn.init.normal_(model.bert.pos_embed.weight, std=0.2, generator=torch.Generator().manual_seed(7))
def batches(step):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    rows = windows[torch.randint(len(windows), (s.batch_size,), generator=g)]
    return mask_tokens(rows, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=vocab.special_ids, generator=g)
h = train.fit(model, bm._mlm_loss(vocab, 0.15), batches, steps=steps, lr=s.lr,
              schedule=train.warmup_cosine(s.warmup, s.steps if steps <= 30 else steps), clip_norm=1.0, seed=seed)
model.eval()
r = bm.mlm_accuracy(model, vocab, held, train_ids)
if variant == "base" and steps <= 30:
    print("live first steps vs the script's stored curve (every 10th):", [round(h.loss[i],4) for i in range(0, steps, 10)],
          [round(report['runs']['0']['loss_curve'][i],4) for i in range(steps//10)])
# neighbour attention at [MASK] queries, per layer (max over heads)
g = torch.Generator().manual_seed(bm.EVAL_SEED)
inp, lab = mask_tokens(held, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=vocab.special_ids, generator=g)
am = (lab != IGNORE_INDEX) & (inp == vocab.mask)
n, t = am.nonzero(as_tuple=True); keep = (t > 0) & (t < 31); n, t = n[keep], t[keep]
nb = []
with torch.no_grad():
    x = model.bert.embed(inp)
    for blk in model.bert.blocks:
        y, w = blk.forward_with_weights(x, mask=None)
        rows = w[n, :, t]
        nb.append(round((rows[torch.arange(len(t)), :, t - 1] + rows[torch.arange(len(t)), :, t + 1]).mean(0).max().item(), 2))
        x = y
print(f"{variant} {steps} steps: held-out acc at [MASK] {r['mask_accuracy']:.3f} (loss {r['mask_loss']:.2f}, top5 {r['mask_top5']:.3f}); "
      f"last-50 train loss {sum(h.loss[-50:])/50:.2f}; best head's attention on t-1 and t+1 per layer {nb}; "
      f"tok std {model.bert.tok_embed.weight.std():.3f} pos std {model.bert.pos_embed.weight.std():.3f}; cpu {time.process_time()-t0:.0f} s")
