# Probe 13 (review fix 4, exercise 5): which rows of tp.new_bart's learned position tables does
# training on the three tasks (3-7 digits) update? 10 steps of tp.train_run, seed 0.
import torch
torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
bart = tp.new_bart(0)
tables = {n: p.detach().clone() for n, p in bart.named_parameters() if "pos" in n}
tp.train_run(bart, tp.task_stream(tp.TASKS, 96, 0), tp.multitask_settings(), seed=0, steps=10)
for n, p in bart.named_parameters():
    if n in tables:
        changed = (p.detach() != tables[n]).any(dim=1).nonzero().flatten().tolist()
        print(n, tuple(p.shape), "rows changed:", changed[0], "to", changed[-1], f"({len(changed)} rows)")
