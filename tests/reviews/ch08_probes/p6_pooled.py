import torch, time
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.transformer import Transformer
from mtlib.data import encode_numbers, PAD
# (1) the control is exactly cross-attention with uniform (frozen) weights
torch.manual_seed(0)
cfg = tr.model_config()
pooled = tr.PooledMemoryTransformer(cfg).eval()
uniform = Transformer(cfg).eval(); uniform.load_state_dict(pooled.state_dict())
for blk in uniform.decoder.layers:
    for lin in (blk.cross_attn.q_proj, blk.cross_attn.k_proj):
        torch.nn.init.zeros_(lin.weight); torch.nn.init.zeros_(lin.bias)
b = encode_numbers(torch.tensor([7, 305, 40519, 777777, 100010]))
tin, lab = tr.shift_right(b.tgt)
with torch.no_grad():
    d = (pooled(b.src, tin) - uniform(b.src, tin)).abs().max().item()
print(f"pooled control vs cross-attention with all-zero scores (uniform weights): max |diff| {d:.2e}")
pooled.train(); loss = tr.buggy_loss("pooled", label_smoothing=0.1)(pooled, b); loss.backward()
dead = sum(p.numel() for blk in pooled.decoder.layers for lin in (blk.cross_attn.q_proj, blk.cross_attn.k_proj)
           for p in lin.parameters() if p.grad is None or p.grad.abs().max() == 0)
print(f"parameters with zero gradient in the control (cross-attention W^Q, W^K): {dead:,} of {sum(p.numel() for p in pooled.parameters()):,}")
# (2) train the control, seed 0, full budget, and look at where it fails
t = time.process_time()
m, hist = tr.train_model(tr.TrainSettings(), seed=0, kind="pooled")
print(f"trained pooled seed 0 (600 steps) in {time.process_time()-t:.0f} s cpu; final loss {sum(hist.loss[-50:])/50:.3f}", flush=True)
h = tr.heldout_sample()
pred = tr.decode(m, h.src)
print("pooled seed 0 on the chapter's sample:", tr.score(pred, h), "(report:", tr.load_checkpoint()[1]["runs"]["pooled/0"]["greedy"], ")")
wrong = ~(pred[:, :h.tgt.shape[1]] == h.tgt).all(1)
nums = h.numbers.tolist()
for dgt in range(3, 7):
    sel = torch.tensor([len(str(n)) == dgt for n in nums])
    distinct = {n for n, w, s in zip(nums, wrong.tolist(), sel.tolist()) if s}
    dw = {n for n, w, s in zip(nums, wrong.tolist(), sel.tolist()) if s and w}
    print(f"  {dgt} digits: {wrong[sel].float().mean():.3f} wrong of {int(sel.sum())} draws; distinct {len(dw)}/{len(distinct)} wrong")
# distinct-number accuracy
seen = {}
for n, w in zip(nums, wrong.tolist()): seen[n] = w
print(f"  distinct numbers: {len(seen)}, exact {1 - sum(seen.values())/len(seen):.4f}")
# random 5000 from all held-out, uniform over numbers (mostly 6-digit)
allh = tr.heldout_numbers(); g = torch.Generator().manual_seed(0)
pick = allh[torch.randperm(len(allh), generator=g)[:5000]]
bb = encode_numbers(pick); print("  5000 held-out drawn uniformly over numbers:", tr.evaluate(m, bb))
# examples of errors
from mtlib.data import decode_words
for i in wrong.nonzero()[:6, 0].tolist():
    print(f"    {nums[i]:>7,}: '{decode_words(pred[i])}'  (should be '{decode_words(h.tgt[i])}')")
torch.save(m.state_dict(), "pooled_seed0.pt")
