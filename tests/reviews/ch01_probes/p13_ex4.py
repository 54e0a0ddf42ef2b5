# Exercise 4: copy vs reverse, bidirectional and unidirectional encoders, without attention (seed 0).
import sys, time, torch
from defs import *
kind, bidir = sys.argv[1], sys.argv[2] == "bi"
t = time.process_time()
m = build("without attention", 0, bidirectional=bidir); train(m, kind=kind)
r = [eval_batch(m, L, kind=kind)[3].float().mean().item() for L in LENGTHS]
print(f"{kind:<8} {'bidirectional' if bidir else 'one-way':<14}" + "".join(f"{x:>6.2f}" for x in r), f" cpu {time.process_time()-t:.0f}s")
