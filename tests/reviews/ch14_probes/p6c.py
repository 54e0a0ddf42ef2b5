# Probe 6c: scratch at lr 3e-3 on a third seed (2).
import torch; torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
h = tp.train_run(tp.new_model(2), tp.fill_stream(32, 2), tp.finetune_settings(lr=3e-3), seed=2, eval_fn=tp.fill_metrics)
ev = {e["step"]: e for e in h.evals}
print(f"scratch lr 3e-3, seed 2: loss@100 {ev[100]['loss']:.2f} @300 {ev[300]['loss']:.2f} top5@300 {ev[300]['top5']:.3f} exact@300 {ev[300]['exact']:.3f}")
