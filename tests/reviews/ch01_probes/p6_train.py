# Train chapter-1 models (same code as cell 28) and save them. usage: p6_train.py NAME SEED [d_hidden]
import sys, time, torch
from defs import *
name, seed = sys.argv[1], int(sys.argv[2])
t = time.process_time()
m = build(name, seed)
losses = train(m, seed=seed)
torch.save(m.state_dict(), f"ckpt/{name.replace(' ', '_').replace(',', '').replace('=', '')}_{seed}.pt")
print(f"{name} seed {seed}: final loss {losses[-1]:.3f}, cpu {time.process_time() - t:.1f}s")
