import torch, random
torch.set_num_threads(1)
exec(open('p1_attention.py').read().split("ok = lambda")[0])
ok = lambda n: n >= 100_000 and "0" not in str(n) and str(n)[1] != "1" and str(n)[4] != "1"
allq = [n for n in tr.heldout_numbers().tolist() if ok(n)]
for seed in (0,1,2):
    random.seed(seed); rnd = random.sample(allq, 500)
    l1, l2 = [w.mean((0,1)) for w in maps_of(m, rnd)]
    print(seed, "L2 rows thousand/hundred/hundred/EOS argmax", [int(l2[r].argmax()) for r in (1,4,6,9)],
          "L1 row1 argmax", int(l1[1].argmax()), [round(x,2) for x in l1[1].tolist()],
          "L1 thousand top2", sorted(l1[4].topk(2).indices.tolist()), [round(x,2) for x in l1[4].tolist()])
