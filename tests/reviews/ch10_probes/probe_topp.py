import torch, warnings
torch.set_num_threads(1)
from transformers.generation.logits_process import TopPLogitsWarper
from mtlib.models.gpt import top_p_filter
g = torch.Generator().manual_seed(1)
cnt = {"ties": [0, 0], "-inf": [0, 0], "plain": [0, 0]}
ex = None
for trial in range(300):
    z = torch.randn(4, 50, generator=g) * 3
    kind = "plain"
    if trial % 3 == 0: z = (z * 2).round() / 2; kind = "ties"
    if trial % 5 == 0: z[:, :10] = float("-inf"); kind = "-inf" if kind == "plain" else kind
    int(torch.randint(1, 60, (1,), generator=g)); p = float(torch.rand(1, generator=g)) * 0.99 + 0.01
    a = TopPLogitsWarper(top_p=p)(None, z.clone()).isfinite(); b = top_p_filter(z, p).isfinite()
    mism = (a != b).any(-1)
    cnt[kind][0] += int(mism.sum()); cnt[kind][1] += 4
    if kind == "plain" and mism.any() and ex is None:
        r = int(mism.nonzero()[0]); ex = (z[r], p, a[r].sum().item(), b[r].sum().item())
print(cnt)
if ex:
    z, p, na, nb = ex
    pr = torch.softmax(z, -1).sort(descending=True).values.double()
    print("p", p, "hf keeps", na, "mtlib keeps", nb, "cum at boundary", pr.cumsum(0)[min(na, nb) - 2: max(na, nb) + 1].tolist())
