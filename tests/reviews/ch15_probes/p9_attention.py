"""Cell 33/35: the prose's ranges against all 32 queries, and per head (seed-0 models)."""
import torch, time
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl, char_lm
t0 = time.process_time()
models, report = txl.load_checkpoint()
tok, tr, va = char_lm.splits()
@torch.no_grad()
def first_layer_attention(model, ids, n_segments=24, batch=16):  # the chapter's helper, heads kept
    rows = txl.streams(ids, batch); T, Tm = model.config.seg_len, model.config.mem_len
    layer = model.layers[0]; absolute = model.config.positions == "absolute"
    r = None if absolute else model.table[: Tm + T].flip(0)
    mask = torch.ones(T, Tm + T, dtype=torch.bool).tril(diagonal=Tm)
    _, mems = model(rows[:, :T]); total = 0
    for s in range(1, n_segments + 1):
        idx = rows[:, s * T:(s + 1) * T]
        x = model.tok_emb(idx) + (model.table[:T] if absolute else 0)
        context = layer.norm1(torch.cat([mems[0], x], dim=1))
        total = total + layer.attn.attention_weights(context[:, Tm:], context, r=r, mask=mask).mean(0)  # (H, T, K)
        _, mems = model(idx, mems)
    return total / n_segments
for name in ("xl", "xl_absolute"):
    w = first_layer_attention(models[f"text/{name}"], va); wm = w.mean(0)
    prev = torch.stack([wm[i, 31 + i] for i in range(32)])
    echo = torch.stack([wm[i, i] / wm[i, 32 + i] for i in range(32)])
    print(f"{name}: previous-char weight over queries 0-31: min {prev.min():.2f} max {prev.max():.2f};"
          f" echo ratio queries 1-31: min {echo[1:].min():.2f} max {echo[1:].max():.2f}, query 0 {echo[0]:.2f}")
    ph = torch.stack([torch.stack([w[h, i, 31 + i] for i in range(32)]).mean() for h in range(w.shape[0])])
    pe = torch.stack([torch.stack([w[h, i, i] for i in range(1, 32)]).mean() for h in range(w.shape[0])])
    print(f"   per head: mean previous-char weight {[round(v, 2) for v in ph.tolist()]}, mean weight on the 32-back echo {[round(v, 2) for v in pe.tolist()]}")
print("cpu s", round(time.process_time() - t0, 1))
