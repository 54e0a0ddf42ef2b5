"""Equal shards of SEQUENCES are not equal shards of LOSS TERMS when targets are padded:
the mean over ranks of per-rank token means is not the global token mean."""
import torch
torch.set_num_threads(1)
from mtlib import distributed as du, train
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT
data = exp.dataset()
batch = exp.global_batch(data, 0)  # (16, 33)
PAD = 95
g = torch.Generator().manual_seed(0)
lengths = torch.randint(4, 33, (16,), generator=g)
lengths[:8] = torch.randint(4, 12, (8,), generator=g)  # rank 0's shard: short sequences
targets = batch[:, 1:].clone()
for i, L in enumerate(lengths.tolist()):
    targets[i, L:] = PAD
inputs = batch[:, :-1]
du.seed_all(0)
model = GPT(exp.model_config()).double()
def flat(loss):
    model.zero_grad(); loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])
def L(sl):
    return train.sequence_loss(model(inputs[sl]), targets[sl], pad_id=PAD)
full = flat(L(slice(0, 16)))
avg = (flat(L(slice(0, 8))) + flat(L(slice(8, 16)))) / 2
print("tokens per shard:", int((targets[:8] != PAD).sum()), int((targets[8:] != PAD).sum()))
print("padded targets: max |mean of 2 shard grads - full grad| = %.3g (|full grad| max %.3g)" % ((full - avg).abs().max(), full.abs().max()))
# the same with accumulate_gradients (micro-batches of 4)
model.zero_grad()
du.accumulate_gradients(model, [slice(i, i + 4) for i in range(0, 16, 4)], lambda m, sl: train.sequence_loss(m(inputs[sl]), targets[sl], pad_id=PAD))
acc = torch.cat([p.grad.flatten() for p in model.parameters()])
print("accumulate_gradients, 4 padded micro-batches of 4: max |diff| = %.3g" % (full - acc).abs().max())
# token-weighted fix: each rank scales by N * n_tokens_r / n_tokens_total
n = [(targets[:8] != PAD).sum(), (targets[8:] != PAD).sum()]
fix = (flat(L(slice(0, 8)) * 2 * n[0] / (n[0] + n[1])) + flat(L(slice(8, 16)) * 2 * n[1] / (n[0] + n[1]))) / 2
print("token-weighted (N n_r / n_total): max |diff| = %.3g" % (full - fix).abs().max())
