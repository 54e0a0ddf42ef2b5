# 7.2: a capacity test: more facts than 1536, trained long (3000 steps), seed 0.
import p5_lib as P
from common import *
t0 = time.process_time()
for n in (3072, 6144):
    P.N_FACTS = n
    for act in ("relu", "gelu", "swiglu"):
        a, l = P.memorise(act, 0, steps=3000)
        print(f"N={n} {act:>6}: 3000 steps recall {a:.3f} (loss {l:.3f})")
print("cpu s", time.process_time() - t0)
