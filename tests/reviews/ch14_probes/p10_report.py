# Probe 10: numbers in the prose that no cell prints, read from the stored reports.
import torch; torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
_, rep = tp.load_multitask()
runs = rep["runs"]
for s in range(5):
    print(s, {k: {t: round(a, 3) for t, a in runs[f"{k}/{s}"]["accuracy"].items()} for k in ("multitask", "multitask_long")},
          {t: round(runs[f"{t}/{s}"]["accuracy"][t], 3) for t in tp.TASKS})
print("script seconds, multitask experiment:", round(sum(r["seconds"] for r in runs.values())), "s over", len(runs), "runs")
print("final training loss multitask vs single:", [round(runs[f"multitask/{s}"]["final_loss"], 3) for s in range(5)])
print("fill task sizes:", len(tp.downstream_sentences()[0]), len(tp.downstream_sentences()[1]), len(tp.heldout_fill_batch().labels))
print("pretraining stream tokens:", tp.pretraining_stream().numel())
