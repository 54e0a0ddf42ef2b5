import time, torch
from defs import *
t=time.process_time(); m=build("with attention"); train(m, steps=30); print("attn 30 steps cpu s", time.process_time()-t)
t=time.process_time(); m=build("without attention"); train(m, steps=30); print("noattn 30 steps cpu s", time.process_time()-t)
