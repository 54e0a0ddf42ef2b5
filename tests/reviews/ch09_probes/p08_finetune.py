# Fine-tuning probes. usage: p08_finetune.py PART
from common import *
import json, sys, dataclasses
from collections import defaultdict
import torch.nn.functional as F
part = sys.argv[1]
t0 = time.process_time()
mlm, vocab, report = bm.load_checkpoint()
tr, he = bm.task_data(vocab)
ph = bm.phrases(); held = [p for p in ph if p.heldout]
groups = defaultdict(set)
for p in ph: groups[tuple(sorted(vocab.encode(p.text)))].add(p.label)
amb = torch.tensor([len(groups[tuple(sorted(vocab.encode(p.text)))]) > 1 for p in held])
def acc_sub(m, sub):
    m.eval()
    with torch.no_grad():
        pred = bm._forward(m, he[0], he[1]).argmax(-1)
    return ((pred == he[2])[sub]).float().mean().item()
def ft(init, steps, seed, data=tr):
    torch.manual_seed(seed)
    m = bm.classifier_from_pretrained(mlm if init == "pretrained" else None, vocab, **({"init_std": 0.05} if init == "std05" else {}))
    bm.finetune(m, data, bm.FinetuneSettings(steps=steps, warmup=steps // 10), seed=seed)
    return m.eval()
out = {}
if part == "A1":
    for init, steps in (("pretrained", 75), ("scratch", 300)):
        for seed in (0, 1, 2):
            m = ft(init, steps, seed)
            out[f"{init}_{steps}_{seed}"] = dict(heldout=bm.accuracy(m, he), amb=acc_sub(m, amb), nonamb=acc_sub(m, ~amb), train=bm.accuracy(m, tr))
if part == "A2":
    for seed in (0, 1, 2):
        m = ft("scratch", 600, seed)
        out[f"scratch_600_{seed}"] = dict(heldout=bm.accuracy(m, he), amb=acc_sub(m, amb), nonamb=acc_sub(m, ~amb), train=bm.accuracy(m, tr))
if part == "B":
    import mtlib.experiments.bert_mlm as B
    for seed in [int(s) for s in sys.argv[2].split(",")]:
        for init in ("pretrained", "scratch"):
            m = ft(init, 150, seed)
            out[f"{init}_150_{seed}"] = dict(heldout=bm.accuracy(m, he), amb=acc_sub(m, amb), nonamb=acc_sub(m, ~amb), train=bm.accuracy(m, tr))
            if init != "pretrained": continue
            # roles of [CLS] attention (as cell 25)
            w = bm.last_layer_attention(m, he[0], he[1]).mean(1)[:, 0]
            shares = {}
            for t in ("not {a}", "{a} but {b}"):
                mem = [i for i, p in enumerate(held) if p.template == t]
                tot = defaultdict(float)
                for i in mem:
                    for j, r in enumerate(bm.token_roles(vocab, held[i])): tot[r] += w[i, j].item() / len(mem)
                shares[t] = dict(tot)
            minnot = min(sum(w[i, j].item() for j, r in enumerate(bm.token_roles(vocab, held[i])) if r == "not") / 1 for i in [0])  # placeholder
            per_t_not = {}
            for t in bm.TEMPLATES:
                if "not" not in t: continue
                mem = [i for i, p in enumerate(held) if p.template == t]
                per_t_not[t] = sum(w[i, j].item() for i in mem for j, r in enumerate(bm.token_roles(vocab, held[i])) if r == "not") / len(mem)
            out[f"roles_{seed}"] = dict(not_in_notX=shares["not {a}"].get("not", 0), but_in_XbutY=shares["{a} but {b}"].get("other", 0),
                                        first_in_XbutY=shares["{a} but {b}"].get("first word", 0), min_not=min(per_t_not.values()))
            # break it: pad to 32, no mask
            ids = F.pad(he[0], (0, 32 - he[0].shape[1]), value=vocab.pad); mk = F.pad(he[1], (0, 32 - he[1].shape[1]))
            with torch.no_grad():
                right = m(ids, attention_mask=mk).argmax(-1); nomask = m(ids).argmax(-1)
                nomask_native = m(he[0]).argmax(-1)  # no mask, padded only to the batch's longest phrase
            out[f"break_{seed}"] = dict(right=(right == he[2]).float().mean().item(), nomask32=(nomask == he[2]).float().mean().item(),
                                        changed32=(nomask != right).float().mean().item(), nomask_native=(nomask_native == he[2]).float().mean().item())
            if seed <= 2:  # distillation controls
                st = bm.distill(m, tr, bm.FinetuneSettings(), seed=seed)
                cont = bm.classifier_from_pretrained(None, vocab); cont.load_state_dict(m.state_dict())
                bm.finetune(cont, tr, bm.FinetuneSettings(), seed=seed)  # the teacher, 150 more steps (the student's extra budget)
                torch.manual_seed(seed)
                small = bm.classifier_from_pretrained(None, vocab, n_layer=2)  # 2 blocks from the PRETRAINED MLM (blocks 0 and 2), no teacher
                sd = {k: v for k, v in mlm.bert.state_dict().items() if not k.startswith("blocks.")}
                for i, j in ((0, 0), (1, 2)):
                    sd |= {k.replace(f"blocks.{j}.", f"blocks.{i}.", 1): v for k, v in mlm.bert.state_dict().items() if k.startswith(f"blocks.{j}.")}
                small.bert.load_state_dict(sd, strict=False)
                bm.finetune(small, tr, bm.FinetuneSettings(), seed=seed)
                out[f"distill_{seed}"] = dict(teacher=bm.accuracy(m, he), student_soft=bm.accuracy(st, he), teacher_300=bm.accuracy(cont, he),
                                              small_from_pretrained_150=bm.accuracy(small, he),
                                              student_amb=acc_sub(st, amb), teacher_amb=acc_sub(m, amb), small_amb=acc_sub(small, amb))
if part == "C":
    for lr in (1e-3, 3e-3, 1e-2):
        for steps in (150, 1500):
            for seed in (0, 1, 2):
                torch.manual_seed(seed); bag = bm.BagOfEmbeddings(vocab.size)
                bm.finetune(bag, tr, bm.FinetuneSettings(steps=steps, warmup=steps // 10, lr=lr), seed=seed)
                out[f"bag_lr{lr}_{steps}_{seed}"] = dict(heldout=bm.accuracy(bag, he), train=bm.accuracy(bag, tr), amb=acc_sub(bag, amb), nonamb=acc_sub(bag, ~amb))
out["cpu_s"] = time.process_time() - t0
tag = sys.argv[2].replace(",", "") if len(sys.argv) > 2 else ""
json.dump(out, open(f"p08_{part}{tag}.json", "w"), indent=1)
for k, v in out.items(): print(k, {a: round(b, 3) for a, b in v.items()} if isinstance(v, dict) else round(v, 1))
