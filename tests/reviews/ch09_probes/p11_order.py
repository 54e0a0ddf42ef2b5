# Does the pretrained MLM use word ORDER at all? Permute the context tokens of each window (positions 1..30,
# the [MASK]s moved along with the rest), then read the prediction at each original [MASK]'s new position.
from common import *
from mtlib.models import mask_tokens
from mtlib.models.bert import IGNORE_INDEX
mlm, vocab, _ = bm.load_checkpoint()
_, held_text = bm.corpus()
held = bm.mlm_windows(vocab.encode(held_text), vocab)
g = torch.Generator().manual_seed(bm.EVAL_SEED)
inp, lab = mask_tokens(held, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=vocab.special_ids, generator=g)
am = (lab != IGNORE_INDEX) & (inp == vocab.mask)
gp = torch.Generator().manual_seed(0)
perm = torch.stack([torch.cat([torch.tensor([0]), 1 + torch.randperm(30, generator=gp), torch.tensor([31])]) for _ in range(len(inp))])
inp_p = inp.gather(1, perm); lab_p = lab.gather(1, perm); am_p = am.gather(1, perm)
with torch.no_grad():
    a = (mlm(inp).argmax(-1) == lab)[am].float().mean().item()
    b = (mlm(inp_p).argmax(-1) == lab_p)[am_p].float().mean().item()
print(f"held-out accuracy at [MASK]: windows in order {a:.3f}; context shuffled {b:.3f}")
