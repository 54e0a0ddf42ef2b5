"""Copy task, seed-0 XL model: per-token accuracy, whole-document recall, where the loss sits."""
import torch, time, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl
t0 = time.process_time()
models, report = txl.load_checkpoint()
m = models["copy/xl"]
d = txl.task_data("copy")
val, scored = d["val"], d["val_scored"]
rows, keep = txl.streams(val, 16), txl.streams(scored, 16)
B, N = rows.shape; T = m.config.seg_len
loss = torch.full((B, N - 1), float('nan')); hit = torch.zeros(B, N - 1, dtype=torch.bool)
mems = None
with torch.no_grad():
    for s in range(0, N - 1, T):
        x, y = rows[:, s:s+T], rows[:, s+1:s+T+1]; x = x[:, :y.shape[1]]
        lg, mems = m(x, mems)
        loss[:, s:s+y.shape[1]] = F.cross_entropy(lg.transpose(1, 2), y, reduction='none')
        hit[:, s:s+y.shape[1]] = lg.argmax(-1) == y
k = keep[:, 1:]
print("copied-token loss", round(loss[k].mean().item(), 4), "(report", round(report["runs"]["copy/xl/0"]["val"], 4), ")")
print("copied-token argmax accuracy", round(hit[k].float().mean().item(), 4))
# documents: 96 tokens; stream length N = 1200 = 12.5 docs per stream -> documents split across streams
doc = torch.arange(len(val)) // 96
docs = txl.streams(doc, 16)[:, 1:]
ok, tot = 0, 0
per_doc_loss = []
for dd in docs.unique():
    sel = (docs == dd) & k
    if sel.sum() == 72:  # whole document inside one stream
        tot += 1; ok += int(hit[sel].all()); per_doc_loss.append(loss[sel].mean().item())
print(f"documents with all 72 copied tokens argmax-correct: {ok}/{tot}")
# by block (2nd, 3rd, 4th) and by position in the segment
pos_in_doc = txl.streams(torch.arange(len(val)) % 96, 16)[:, 1:]
block = pos_in_doc // 24
for b in (1, 2, 3):
    sel = k & (block == b)
    print(f"block {b+1}: loss {loss[sel].mean():.3f} acc {hit[sel].float().mean():.3f}")
pos_seg = (torch.arange(N - 1) % T).expand(B, -1)
print("loss by position in segment:", [round(loss[k & (pos_seg == p)].mean().item(), 2) for p in range(T)])
# worst tokens share: fraction of total loss from the top 5% of tokens
v = loss[k].sort(descending=True).values
print("share of total copied loss in the worst 5% of tokens:", round((v[: len(v)//20].sum() / v.sum()).item(), 3))
print("cpu s", round(time.process_time() - t0, 1))
