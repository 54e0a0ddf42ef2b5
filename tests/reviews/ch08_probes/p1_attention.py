# Probe: is the cross-attention template representative? per-head, per-example spread, random sample.
import torch, math, random
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.data import encode_numbers, PAD
m, rep = tr.load_checkpoint()

def maps_of(model, nums):
    b = encode_numbers(torch.tensor(nums)); tin,_ = tr.shift_right(b.tgt)
    out = []
    hooks = []
    store = []
    with torch.no_grad():
        memory = model.encode(b.src); mask = model.src_mask(b.src)
        # replicate decode_by_hand with per-head weights
        y = model._embed(model.tgt_embed, tin)
        T = tin.shape[1]
        causal = torch.ones(T,T,dtype=torch.bool).tril()
        sm = causal & (tin!=PAD)[:,None,None,:]
        for blk in model.decoder.layers:
            y = blk.norm1(y + blk.self_attn(y, mask=sm)[0])
            ctx, w = blk.cross_attn(y, memory, memory, mask=mask, need_weights=True, average_attn_weights=False)
            y = blk.norm2(y + ctx); y = blk.norm3(y + blk.ff(y))
            out.append(w)  # (B,H,T,S)
    return out

ok = lambda n: n >= 100_000 and "0" not in str(n) and str(n)[1] != "1" and str(n)[4] != "1"
allq = [n for n in tr.heldout_numbers().tolist() if ok(n)]
first500 = allq[:500]
print("qualifying held-out numbers:", len(allq), "; chapter's first 500 range", first500[0], "to", first500[-1])
print("distinct leading two digits in chapter's template:", sorted({str(n)[:2] for n in first500}))
random.seed(0); rnd = random.sample(allq, 500)
decides = {0: 0, 2: 1, 3: 2, 5: 3, 7: 4, 8: 5}
for name, nums in (("chapter first-500", first500), ("random 500", rnd)):
    ws = maps_of(m, nums)
    for L, w in enumerate(ws):
        mean = w.mean(dim=(0,1))
        on = [round(mean[r,d].item(),2) for r,d in decides.items()]
        # per-example, head-averaged: share of examples whose argmax is the deciding digit
        wa = w.mean(1)  # (B,T,S)
        share = [round((wa[:,r].argmax(-1)==d).float().mean().item(),3) for r,d in decides.items()]
        sd = [round(wa[:,r,d].std().item(),3) for r,d in decides.items()]
        print(f"{name} layer {L+1}: mean on-digit {on}; per-example argmax==digit share {share}; sd {sd}")
        if name == "random 500":
            for h in range(w.shape[1]):
                mh = w[:,h].mean(0)
                onh = [round(mh[r,d].item(),2) for r,d in decides.items()]
                arg = [int(mh[r].argmax()) for r in range(10)]
                print(f"   head {h}: on-digit {onh}; argmax digit per row {arg}")
