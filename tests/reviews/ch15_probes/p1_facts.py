import torch, statistics, time
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl, char_lm
models, report = txl.load_checkpoint()
print("report keys", list(report.keys()))
print("settings", report["settings"])
print("runs", len(report["runs"]))
secs = {k: v["seconds"] for k, v in report["runs"].items()}
print("total seconds", sum(secs.values()))
for k in sorted(secs): print(k, secs[k], round(report["runs"][k]["val"],4), "final train(last200)", round(statistics.mean(report["runs"][k]["loss"][-200:]),3))
for k, m in models.items():
    n = sum(p.numel() for p in m.parameters())
    used = n - (0 if m.config.positions=="relative" else sum(p.numel() for l in m.layers for p in (l.attn.r_proj.weight, l.attn.u, l.attn.v)))
    print(k, "params", n, "used", used, m.config)
tok, tr, va = char_lm.splits()
print("train chars", len(tr), "val chars", len(va), "vocab", tok.vocab_size)
d = txl.task_data("copy"); print("copy train", len(d["train"]), "val", len(d["val"]), "scored", int(d["val_scored"].sum()))
