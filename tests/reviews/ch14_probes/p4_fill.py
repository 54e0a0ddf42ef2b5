# Probe 4: what does the fine-tuned (seed 0, from pretraining) model do on the held-out cloze?
# paired comparison with the unigram table, subsets that need the context, context-swap test, leakage.
import torch, torch.nn.functional as F, random
torch.set_num_threads(1)
from collections import Counter
from mtlib.experiments import t5_pretrain as tp
v = tp.vocab()
models, rep = tp.load_pretrain()
ft, pre = models["finetuned"], models["pretrained"]
batch = tp.heldout_fill_batch()
gold = batch.labels[:, 0]
N = len(gold)
# unigram table exactly as tp.unigram_baseline(source="train")
words = [w for s in tp.downstream_sentences()[0] for w in tp.words_of(s)]
counts = Counter(w for w in words if w.isalpha())
p = torch.full((v.size,), 0.1)
for w, c in counts.items():
    if w in v.stoi: p[v.stoi[w]] += c
uni_logp = (p / p.sum()).log()
@torch.no_grad()
def logits_of(model, input_ids, mask):
    model.eval()
    return model(input_ids, torch.zeros_like(input_ids[:, :1]), mask)[:, 0]
lg = logits_of(ft, batch.input_ids, batch.attention_mask)
lp = lg.log_softmax(-1)
m_nll = -lp[torch.arange(N), gold]
u_nll = -uni_logp[gold]
print(f"N={N}; model loss {m_nll.mean():.3f}, unigram loss {u_nll.mean():.3f} (stored: {rep['unigram']['loss']:.3f})")
m_top5 = (lg.topk(5, -1).indices == gold[:, None]).any(1).float()
u_top5 = torch.isin(gold, uni_logp.topk(5).indices).float()
print(f"top-5: model {m_top5.mean():.3f}, unigram {u_top5.mean():.3f}; discordant: model-only {int(((m_top5==1)&(u_top5==0)).sum())}, unigram-only {int(((m_top5==0)&(u_top5==1)).sum())}")
print("unigram top-5 words:", [v.itos[i] for i in uni_logp.topk(5).indices], "; model's most frequent top-1:", Counter(v.itos[i] for i in lg.argmax(-1).tolist()).most_common(6))
# paired bootstrap over the 107 sentences (questions of one sentence are not independent)
g = torch.Generator().manual_seed(0)
sent = torch.arange(N) // tp.MASKS_PER_SENTENCE
S = int(sent.max()) + 1
d_loss, d_top5 = [], []
for _ in range(2000):
    pick = torch.randint(0, S, (S,), generator=g)
    idx = torch.cat([torch.nonzero(sent == s).flatten() for s in pick.tolist()])
    d_loss.append((m_nll[idx] - u_nll[idx]).mean().item()); d_top5.append((m_top5[idx] - u_top5[idx]).mean().item())
q = lambda xs: (sorted(xs)[50], sorted(xs)[1949])
print(f"model - unigram, 95% paired bootstrap over sentences: loss {(m_nll-u_nll).mean():+.3f} {q(d_loss)}, top-5 {(m_top5-u_top5).mean():+.3f} {q(d_top5)}")
# subsets: answers that are frequent function words vs the rest
rank = torch.empty(v.size, dtype=torch.long); rank[uni_logp.argsort(descending=True)] = torch.arange(v.size)
for name, sel in (("answer among the 20 most frequent words", rank[gold] < 20), ("answer outside the top 20", rank[gold] >= 20)):
    print(f"{name:<42} n={int(sel.sum()):3d}: model loss {m_nll[sel].mean():.2f}, unigram {u_nll[sel].mean():.2f}; top-5 model {m_top5[sel].mean():.3f} unigram {u_top5[sel].mean():.3f}")
# how much does the prediction depend on the sentence? mean KL(pred_i || mean pred), and a context swap
mean_p = lp.exp().mean(0)
kl_to_mean = (lp.exp() * (lp - mean_p.log())).sum(-1).mean()
kl_to_uni = (lp.exp() * (lp - uni_logp)).sum(-1).mean()
print(f"mean KL(prediction || its average over questions) = {kl_to_mean:.3f} nats (0 for a context-free model); mean KL(prediction || unigram) = {kl_to_uni:.3f}")
# context swap: each question's input replaced by another sentence's masked input; score the ORIGINAL gold
perm = torch.randperm(N, generator=torch.Generator().manual_seed(1))
perm = torch.where(sent[perm] == sent, perm.roll(1), perm)
lp_sw = logits_of(ft, batch.input_ids[perm], batch.attention_mask[perm]).log_softmax(-1)
print(f"loss with the question's own sentence {m_nll.mean():.3f}; with another question's sentence {-lp_sw[torch.arange(N), gold].mean():.3f}")
# leakage: does the 5-gram around the answer occur in the pretraining stream / in the fine-tuning sentences?
stream = tp.pretraining_stream().tolist()
def ngrams(seq, n):
    return {tuple(seq[i:i+n]) for i in range(len(seq)-n+1)}
S5 = ngrams(stream, 5); S7 = ngrams(stream, 7)
hits5 = hits7 = 0; inside = 0
ids = batch.input_ids.tolist()
for r, row in enumerate(ids):
    row = [t for t in row[1:] if t not in (0, 1)]  # drop prefix, eos, pad
    i = row.index(v.stoi["<mask>"]); full = row[:i] + [int(gold[r])] + row[i+1:]
    j = i
    g5 = tuple(full[max(0, j-2): j+3]); g7 = tuple(full[max(0, j-3): j+4])
    hits5 += g5 in S5 and len(g5) == 5; hits7 += g7 in S7 and len(g7) == 7
print(f"held-out questions whose 5-gram (2 left, answer, 2 right) occurs in the pretraining stream: {hits5}/{N}; 7-gram: {hits7}/{N}")
