"""Does compute split as 1/N? CPU time of forward+backward at batch 16 vs 8, and of the
optimizer step (which every DDP rank does in full, for all P parameters)."""
import time, torch
torch.set_num_threads(1)
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT
data = exp.dataset()
for dtype in (torch.float32, torch.float64):
    torch.manual_seed(0)
    m = GPT(exp.model_config()).to(dtype)
    opt = torch.optim.AdamW(m.parameters(), lr=exp.LR, betas=(0.9, 0.98), weight_decay=0.0, fused=True)
    res = {}
    for B in (16, 8):
        b = exp.global_batch(data, 0)[:B]
        fb, st = [], []
        for i in range(25):
            t = time.process_time(); l = exp.loss_fn(m, b); opt.zero_grad(); l.backward(); fb.append(time.process_time() - t)
            t = time.process_time(); opt.step(); st.append(time.process_time() - t)
        fb, st = sorted(fb[5:])[10], sorted(st[5:])[10]
        res[B] = (fb, st)
        print(f"{dtype}, batch {B}: forward+backward {1e3*fb:.2f} ms, optimizer step {1e3*st:.2f} ms (CPU time, median)")
    print(f"  batch 8 / batch 16 forward+backward: {res[8][0]/res[16][0]:.2f} (perfect split: 0.50); "
          f"optimizer step share of a batch-16 step: {res[16][1]/(res[16][0]+res[16][1]):.0%}")
