from common import *
from mtlib.models import mask_tokens
from mtlib.models.bert import IGNORE_INDEX
t0=time.process_time()
mlm, vocab, report = bm.load_checkpoint()
train_text, held_text = bm.corpus()
train_ids = vocab.encode(train_text)
windows = bm.mlm_windows(train_ids, vocab); held = bm.mlm_windows(vocab.encode(held_text), vocab)
# 1. the figure's metric: training windows, loss at all chosen vs at [MASK] only
import torch.nn.functional as F
def losses(w, seed=bm.EVAL_SEED):
    g = torch.Generator().manual_seed(seed)
    inp, lab = mask_tokens(w, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=vocab.special_ids, generator=g)
    with torch.no_grad(): lo = mlm(inp)
    ch = lab != IGNORE_INDEX; am = ch & (inp == vocab.mask); un = ch & (inp == lab); rn = ch & ~am & ~un
    f = lambda m: F.cross_entropy(lo[m], lab[m]).item()
    return dict(all_chosen=f(ch), at_mask=f(am), unchanged=f(un), random=f(rn))
print("train windows (400):", {k: round(v,3) for k,v in losses(windows[::40][:400]).items()})
print("held-out windows   :", {k: round(v,3) for k,v in losses(held).items()})
print("last 10 logged training losses (mean):", round(sum(report['runs']['0']['loss_curve'][-10:])/10,3))
# 2. attention at [MASK] queries: where does it go, per layer
g = torch.Generator().manual_seed(bm.EVAL_SEED)
inp, lab = mask_tokens(held, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=vocab.special_ids, generator=g)
am = (lab != IGNORE_INDEX) & (inp == vocab.mask)
bert = mlm.bert
with torch.no_grad():
    x = bert.embed(inp)
    for li, blk in enumerate(bert.blocks):
        y, w = blk.forward_with_weights(x, mask=None)  # w (B,H,T,T)
        n, t = am.nonzero(as_tuple=True)
        rows = w[n, :, t]  # (M, H, T)
        T = w.shape[-1]
        ent = -(rows.clamp_min(1e-12).log() * rows).sum(-1).mean(0)  # (H,)
        self_w = rows[torch.arange(len(t)), :, t].mean(0)
        tl = (t - 1).clamp(min=0); tr = (t + 1).clamp(max=T - 1)
        left = rows[torch.arange(len(t)), :, tl].mean(0); right = rows[torch.arange(len(t)), :, tr].mean(0)
        # mass on other [MASK] tokens and on CLS/SEP
        ismask = (inp == vocab.mask)[n]  # (M,T)
        on_mask = (rows * ismask[:, None, :]).sum(-1).mean(0)
        spec = ((inp == vocab.cls) | (inp == vocab.sep))[n]
        on_spec = (rows * spec[:, None, :]).sum(-1).mean(0)
        print(f"layer {li}: entropy/head {[round(v,2) for v in ent.tolist()]} (uniform {torch.log(torch.tensor(32.)).item():.2f}); "
              f"self {[round(v,2) for v in self_w.tolist()]}; left {[round(v,2) for v in left.tolist()]}; right {[round(v,2) for v in right.tolist()]}; "
              f"on [MASK]s {[round(v,2) for v in on_mask.tolist()]}; on CLS/SEP {[round(v,2) for v in on_spec.tolist()]}")
        x = y
# 3. sensitivity of the [MASK] prediction to its left neighbour
with torch.no_grad():
    base_lp = mlm(inp).log_softmax(-1)
    inp2 = inp.clone()
    n, t = am.nonzero(as_tuple=True)
    keep = (t > 1)
    n, t = n[keep], t[keep]
    gen = torch.Generator().manual_seed(1)
    inp2[n, t - 1] = torch.randint(0, 1000, (len(t),), generator=gen)
    lp2 = mlm(inp2).log_softmax(-1)
    kl = (base_lp[n, t].exp() * (base_lp[n, t] - lp2[n, t])).sum(-1)
    print("KL(pred || pred with left neighbour replaced at random) at [MASK]: mean", round(kl.mean().item(),4),
          "; top-1 changes", round((base_lp[n,t].argmax(-1) != lp2[n,t].argmax(-1)).float().mean().item(),3))
    # for reference: unigram-vs-model KL
    ent = -(base_lp[n,t].exp()*base_lp[n,t]).sum(-1).mean()
    print("entropy of the [MASK] prediction (nats):", round(ent.item(),2))
# 4. weight scales of the pretrained encoder
for name, p in mlm.bert.named_parameters():
    if name.endswith("weight") and p.dim() == 2 and ("blocks.0." in name or "embed" in name):
        print(f"{name:<35} std {p.std().item():.3f}")
print("cpu s", round(time.process_time()-t0,1))
