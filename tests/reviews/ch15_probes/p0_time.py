import torch, time
torch.set_num_threads(1)
from mtlib.experiments import transformer_xl as txl
models, report = txl.load_checkpoint()
m = models["text/vanilla"]; x = torch.randint(0, 100, (16, 32))
with torch.no_grad():
    m(x); t = time.process_time()
    for _ in range(50): m(x)
print("cpu ms per (16,32) pass", (time.process_time() - t) / 50 * 1000)
