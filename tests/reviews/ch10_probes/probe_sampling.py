import torch, re, time
torch.set_num_threads(1)
from mtlib.experiments import char_lm
model, _, _ = char_lm.load_checkpoint()
tok, tr, va = char_lm.splits()
words = set(re.findall(r"[A-Za-z]{2,}", tok.decode(tr)))
def stats(texts):
    found = [w for t in texts for w in re.findall(r"[A-Za-z]{2,}", t)]
    grams = [t[i:i + 10] for t in texts for i in range(len(t) - 9)]
    return sum(w in words for w in found) / max(len(found), 1), len(set(grams)) / len(grams)
N = 48
starts = torch.arange(N) * (len(va) // N) + 37  # different prompts from the chapter's 16
prompts = torch.stack([va[i:i + 8] for i in starts.tolist()])
rows = {"tau 0.6": dict(temperature=0.6), "tau 0.7": dict(temperature=0.7), "tau 0.8": dict(temperature=0.8),
        "tau 0.9": dict(temperature=0.9), "tau 1.0": dict(temperature=1.0),
        "top-k 5": dict(top_k=5), "top-p 0.9": dict(top_p=0.9)}
t0 = time.time()
for name, kw in rows.items():
    res = []
    per = []
    for seed in (7, 8):
        out = model.generate(prompts, 120, do_sample=True, use_cache=False, generator=torch.Generator().manual_seed(seed), **kw)
        texts = [tok.decode(r[8:]) for r in out]
        res.append(stats(texts)); per += [stats([t]) for t in texts]
    w = torch.tensor([p[0] for p in per]); d = torch.tensor([p[1] for p in per])
    # 16-sample subsets: spread of the real-word share
    g = torch.Generator().manual_seed(0)
    sub = torch.stack([w[torch.randperm(len(w), generator=g)[:16]].mean() for _ in range(200)])
    print(f"{name:<10} seed7 {res[0][0]:.3f}/{res[0][1]:.3f} seed8 {res[1][0]:.3f}/{res[1][1]:.3f} | 96 samples: words {w.mean():.3f}±{w.std()/len(w)**.5:.3f}, distinct {d.mean():.3f}±{d.std()/len(d)**.5:.3f} | 16-sample means of the per-sample word share: sd {sub.std():.3f}")
print(f"{time.time()-t0:.0f} s")
