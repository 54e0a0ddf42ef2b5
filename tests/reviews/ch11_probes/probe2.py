import time, torch
torch.set_num_threads(1)
t0=time.process_time()
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
data = digits_split()
models, report = dg.load_checkpoint()
runs = report["runs"]
print("== P1b: the learned part (trained - init) of the position embeddings")
for s in dg.SEEDS:
    init = dg.make_model("vit", seed=s).pos_embed.detach()[0]
    tr = torch.tensor(runs[f"vit/{s}"]["pos_embed"])
    d = tr - init
    print(f"seed {s}: distance corr trained {dg.similarity_distance_correlation(tr):+.2f} delta {dg.similarity_distance_correlation(d):+.2f} init {dg.similarity_distance_correlation(init):+.2f} | "
          f"ink corr trained {dg.similarity_ink_correlation(tr, data):+.2f} delta {dg.similarity_ink_correlation(d, data):+.2f} init {dg.similarity_ink_correlation(init, data):+.2f}")
# null for a trained-looking but random: what init-like draws of trunc-normal(0.02) give is the chapter's null
# the '4.24' bucket size and neighbour bucket size
dist = dg.grid_distances(4); off = ~torch.eye(16, dtype=torch.bool)
vals, counts = dist[off].round(decimals=3).unique(return_counts=True)
print("pairs per distance (ordered pairs):", dict(zip([round(v,2) for v in vals.tolist()], counts.tolist())))
print("cpu", round(time.process_time()-t0,1))
