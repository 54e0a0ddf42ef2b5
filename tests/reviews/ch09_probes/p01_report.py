from common import *
import json
mlm, vocab, report = bm.load_checkpoint()
print("keys", list(report))
print("settings", report["settings"])
for s, r in report["runs"].items():
    print(s, {k: (round(v,4) if isinstance(v,float) else v) for k,v in r.items() if k!="loss_curve"}, "curve len", len(r["loss_curve"]), r["loss_curve"][:3])
ft = report["finetune"]
print("ft settings", ft["settings"])
for s in [k for k in ft if k.isdigit()]:
    print(s, "train", {k: round(v,3) for k,v in ft[s]["train"].items()}, "params", ft[s]["params"])
print("mlm params", bm.n_params(mlm), "tok embed", mlm.bert.tok_embed.weight.numel())
import os; print("ckpt MB", os.path.getsize(bm.CHECKPOINT)/1e6)
