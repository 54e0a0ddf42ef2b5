from common import *
import torch.nn.functional as F
from mtlib.exercises import check_mlm_masking, check_hf_attention_mask, check_distillation_loss, CheckFailed

def run(name, chk, fn):
    try:
        chk(fn); print(f"[ACCEPTED] {name}")
    except CheckFailed as e:
        print(f"[rejected] {name}: {str(e)[:400]}")
    except Exception as e:
        print(f"[CRASH] {name}: {type(e).__name__} {e}")

def base(ids, *, mask_id, vocab_size, special_ids, generator, mode="ok"):
    never = torch.tensor([*special_ids, mask_id])
    special = torch.isin(ids, never)
    chosen = (torch.rand(ids.shape, generator=generator) < 0.15) & ~special
    u = torch.rand(ids.shape, generator=generator)
    if mode == "specials_first":   # assumes special ids are 0..k-1 (true in the checker, false in the chapter)
        random_ids = torch.randint(len(never), vocab_size, ids.shape, generator=generator)
    elif mode == "mask_may_be_drawn":  # excludes CLS/SEP/PAD but not [MASK]
        allowed = torch.tensor([i for i in range(vocab_size) if i not in list(special_ids)])
        random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    else:
        allowed = torch.tensor([i for i in range(vocab_size) if i not in never.tolist()])
        random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    if mode == "sequential":  # 80% mask, then 10% OF THE REST random (2%)
        m = chosen & (u < 0.8)
        r = chosen & ~m & (torch.rand(ids.shape, generator=generator) < 0.1)
    else:
        m = chosen & (u < 0.8); r = chosen & (u >= 0.8) & (u < 0.9)
    inputs = torch.where(m, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(r, random_ids, inputs)
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    if mode == "labels_only_at_mask":
        labels = torch.where(m, ids, torch.full_like(ids, -100))
    if mode == "inverted_labels":
        labels = torch.where(chosen, torch.full_like(ids, -100), ids)
    if mode == "no_generator":
        pass
    return inputs, labels

def no_generator(ids, *, mask_id, vocab_size, special_ids, generator):
    return base(ids, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids, generator=None)

def exact_count(ids, *, mask_id, vocab_size, special_ids, generator):  # original BERT: exactly round(15%) per row
    never = torch.tensor([*special_ids, mask_id]); special = torch.isin(ids, never)
    score = torch.rand(ids.shape, generator=generator).masked_fill(special, 2.0)
    n = (~special).sum(1, keepdim=True) * 0.15
    rank = score.argsort(1).argsort(1)
    chosen = rank < n.round()
    u = torch.rand(ids.shape, generator=generator)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in never.tolist()])
    rnd = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs = torch.where(chosen & (u < .8), mask_id, ids); inputs = torch.where(chosen & (u >= .8) & (u < .9), rnd, inputs)
    return inputs, torch.where(chosen, ids, -100)

def hf_style(ids, *, mask_id, vocab_size, special_ids, generator):  # DataCollatorForLanguageModeling
    never = torch.tensor([*special_ids, mask_id]); special = torch.isin(ids, never)
    p = torch.full(ids.shape, 0.15).masked_fill(special, 0.0)
    chosen = torch.bernoulli(p, generator=generator).bool()
    m = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    r = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~m
    allowed = torch.tensor([i for i in range(vocab_size) if i not in never.tolist()])
    rnd = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs = ids.clone(); inputs[m] = mask_id; inputs[r] = rnd[r]
    labels = ids.clone(); labels[~chosen] = -100
    return inputs, labels

def never_same(ids, *, mask_id, vocab_size, special_ids, generator):  # random replacement never the original
    inputs, labels = base(ids, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids, generator=generator)
    return inputs, labels

from functools import partial
print("== ex1 wrong answers")
for mode in ("specials_first", "mask_may_be_drawn", "sequential", "labels_only_at_mask", "inverted_labels"):
    run(mode, check_mlm_masking, partial(base, mode=mode))
run("no_generator (global RNG, not reproducible)", check_mlm_masking, no_generator)
print("== ex1 correct variants")
run("ok", check_mlm_masking, base)
run("exact 15% per row (original BERT)", check_mlm_masking, exact_count)
run("HF DataCollator style", check_mlm_masking, hf_style)
# does the 'specials_first' answer actually work on the chapter's vocabulary (specials 1000..1003)?
mlm, vocab, _ = bm.load_checkpoint()
train_text, _ = bm.corpus()
w = bm.mlm_windows(vocab.encode(train_text[:200000]), vocab)
inp, lab = base(w, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=(vocab.pad, vocab.cls, vocab.sep), generator=torch.Generator().manual_seed(0), mode="specials_first")
rep = (lab != -100) & (inp != vocab.mask) & (inp != w)
print("specials_first on the chapter's vocab: share of random replacements that are special ids:",
      round(torch.isin(inp[rep], torch.tensor(vocab.special_ids)).float().mean().item(), 4), "of", int(rep.sum()))
# the test file's own 'correct' masking uses low=4
import sys; sys.path.insert(0, "/work/main")
from tests import test_exercises_ch09 as t09
inp, lab = t09.masking(w, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=(vocab.pad, vocab.cls, vocab.sep), generator=torch.Generator().manual_seed(0))
rep = (lab != -100) & (inp != vocab.mask) & (inp != w)
print("tests' reference `masking` on the chapter's vocab: special ids among random replacements:",
      int(torch.isin(inp[rep], torch.tensor(vocab.special_ids)).sum()), "of", int(rep.sum()))

print("== ex2")
for name, fn in [("== 1 on bool", lambda m: (m == 1)[:, None, None, :]),
                 ("> 0.5", lambda m: (m > 0.5)[:, None, None, :]),
                 ("[..., None, None, :]", lambda m: m.bool()[..., None, None, :]),
                 ("additive float mask", lambda m: (1.0 - m.float())[:, None, None, :] * -1e9),
                 ("int8/uint8", lambda m: m.to(torch.uint8)[:, None, None, :]),
                 ("(B,1,T)", lambda m: m.bool()[:, None, :]),
                 ("(1,1,B,T)", lambda m: m.bool()[None, None]),
                 ("query x key (B,1,T,T)", lambda m: m.bool()[:, None, :, None] & m.bool()[:, None, None, :]),
                 ("expanded (B,1,T,T) keys only", lambda m: m.bool()[:, None, None, :].expand(m.shape[0], 1, m.shape[1], m.shape[1])),
                 ("sign flipped via 1-m", lambda m: (1 - m).bool()[:, None, None, :]),
                 ]:
    run(name, check_hf_attention_mask, fn)

print("== ex3")
def kl(s, t, T): return F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1), log_target=True, reduction="batchmean")
cands = {
 "ok (log_target)": lambda s,t,y,T,a: a*T**2*kl(s,t,T) + (1-a)*F.cross_entropy(s,y),
 "ok (distributions)": lambda s,t,y,T,a: a*T**2*torch.distributions.kl_divergence(torch.distributions.Categorical(logits=t/T), torch.distributions.Categorical(logits=s/T)).mean() + (1-a)*F.cross_entropy(s,y),
 "ok (student detached? no) probabilities": lambda s,t,y,T,a: a*T*T*(F.softmax(t/T,-1)*(F.log_softmax(t/T,-1)-F.log_softmax(s/T,-1))).sum(1).mean() + (1-a)*F.cross_entropy(s,y),
 "alpha swapped": lambda s,t,y,T,a: (1-a)*T**2*kl(s,t,T) + a*F.cross_entropy(s,y),
 "tau^2 on the whole loss": lambda s,t,y,T,a: T**2*(a*kl(s,t,T) + (1-a)*F.cross_entropy(s,y)),
 "hard CE on softened student": lambda s,t,y,T,a: a*T**2*kl(s,t,T) + (1-a)*F.cross_entropy(s/T,y),
 "kl_div with probs as input (no log)": lambda s,t,y,T,a: a*T**2*F.kl_div(F.softmax(s/T,-1), F.softmax(t/T,-1), reduction="batchmean") + (1-a)*F.cross_entropy(s,y),
 "log-probs target without log_target": lambda s,t,y,T,a: a*T**2*F.kl_div(F.log_softmax(s/T,-1), F.log_softmax(t/T,-1), reduction="batchmean") + (1-a)*F.cross_entropy(s,y),
 "KL summed over rows": lambda s,t,y,T,a: a*T**2*F.kl_div(F.log_softmax(s/T,-1), F.log_softmax(t/T,-1), log_target=True, reduction="sum") + (1-a)*F.cross_entropy(s,y),
 "student not softened": lambda s,t,y,T,a: a*T**2*F.kl_div(F.log_softmax(s,-1), F.log_softmax(t/T,-1), log_target=True, reduction="batchmean") + (1-a)*F.cross_entropy(s,y),
 "tau instead of tau^2": lambda s,t,y,T,a: a*T*kl(s,t,T) + (1-a)*F.cross_entropy(s,y),
 "MSE on logits (Caruana)": lambda s,t,y,T,a: a*F.mse_loss(s,t) + (1-a)*F.cross_entropy(s,y),
}
for n, f in cands.items(): run(n, check_distillation_loss, f)
