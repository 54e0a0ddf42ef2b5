import torch
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.data import is_heldout, encode_numbers
# (1) new-combination claim over the whole split and over one run's 76,800 numbers
allnum = torch.arange(1000, 1_000_000)
held = is_heldout(allnum); train_mask = ~held
hi, lo = allnum // 1000, allnum % 1000
tr_hi = torch.zeros(1000, dtype=torch.bool); tr_hi[hi[train_mask]] = True
tr_lo = torch.zeros(1000, dtype=torch.bool); tr_lo[lo[train_mask]] = True
hh, hl = hi[held], lo[held]
print("whole split: held-out >= 1000 whose high block occurs in training:", tr_hi[hh].float().mean().item(),
      " low block (with a nonzero high block):", tr_lo[hl].float().mean().item())
run = torch.cat([tr.batch_stream(tr.TrainSettings(), seed=0)(s).numbers for s in range(600)])
run = run[run >= 1000]
r_hi = torch.zeros(1000, dtype=torch.bool); r_hi[run // 1000] = True
r_lo = torch.zeros(1000, dtype=torch.bool); r_lo[run % 1000] = True
h = tr.heldout_sample(); hs = h.numbers[h.numbers >= 1000]
print("one run (76,800 numbers): sample's held-out >= 1000 with high block seen:", r_hi[hs // 1000].float().mean().item(),
      " low block seen:", r_lo[hs % 1000].float().mean().item())
# how many distinct training numbers does one run see, per length
for d in range(1, 7):
    allr = torch.cat([tr.batch_stream(tr.TrainSettings(), seed=0)(s).numbers for s in range(600)])
    sel = allr[(allr >= (0 if d == 1 else 10**(d-1))) & (allr < 10**d)]
    print(f"  {d} digits: {len(sel)} draws, {len(set(sel.tolist()))} distinct, of {int((~is_heldout(torch.arange(0 if d==1 else 10**(d-1), 10**d))).sum())} training numbers")
    if d == 3: break
# (2) the control's cross-attention W^Q/W^K gradient
torch.manual_seed(0)
p = tr.PooledMemoryTransformer(tr.model_config()); p.train()
b = encode_numbers(torch.tensor([7, 305, 40519, 777777, 100010]))
tr.buggy_loss("pooled", label_smoothing=0.1)(p, b).backward()
g = max(lin.weight.grad.abs().max().item() for blk in p.decoder.layers for lin in (blk.cross_attn.q_proj, blk.cross_attn.k_proj))
gv = max(blk.cross_attn.v_proj.weight.grad.abs().max().item() for blk in p.decoder.layers)
print(f"control: largest |grad| of cross-attention W^Q, W^K {g:.2e} (W^V: {gv:.2e})")
