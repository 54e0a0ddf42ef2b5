import time, torch
torch.set_num_threads(1)
from mtlib.experiments import ddp as exp
from mtlib.models.gpt import GPT
data = exp.dataset()
torch.manual_seed(0)
m = GPT(exp.model_config())
opt = torch.optim.AdamW(m.parameters(), lr=exp.LR)
b = exp.global_batch(data, 0)
for dt in (torch.float32,):
    t=time.process_time()
    for i in range(10):
        l = exp.loss_fn(m, b); opt.zero_grad(); l.backward(); opt.step()
    print(dt, (time.process_time()-t)/10*1e3, "ms cpu per step")
print("empty batch:", exp.global_batch(data, 256).shape, exp.loss_fn(m, exp.global_batch(data, 256)).item())
