"""Chapter 8, cell 31 under the seed sweep's own shifts: the unmasked padding's final training
loss against the correct model's, three seeds each, with ``MTLIB_SEED_SHIFT=1000k`` for k = 0-10
(as ``tests.seed_sweep`` sets it, so the data stream moves with the model's seeds).

Which comparison of the two 3-seed groups holds on every shift: max < max (the assert that failed
on shift 7), mean < mean, or seed by seed? Run: python tests/reviews/ch08_probes/p10_padding_shifts.py
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

WORKER = """
import json, torch
from mtlib import utils
utils.apply_seed_shift()
from mtlib.experiments import translation as tr
torch.set_num_threads(1)
config = tr.model_config(d_model=32, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
out = {}
for bug in ("none", "no_padding_mask"):
    out[bug] = []
    for seed in (0, 1, 2):
        _, history = tr.train_model(tr.debug_settings(), seed=seed, kind=bug, config=config)
        out[bug].append(sum(history.loss[-25:]) / 25)
print(json.dumps(out))
"""


def run(k):
    env = dict(os.environ, MTLIB_SEED_SHIFT=str(1000 * k))
    done = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True, text=True, check=True)
    return k, json.loads(done.stdout.strip().splitlines()[-1])


with ThreadPoolExecutor(2) as pool:
    results = dict(pool.map(run, range(11)))
print("shift  none: seeds (mean)              no_padding_mask: seeds (mean)      max<max mean<mean paired")
for k, r in sorted(results.items()):
    a, b = r["none"], r["no_padding_mask"]
    paired = min(x - y for x, y in zip(a, b))
    print(f"{k:>5}  {' '.join(f'{x:.4f}' for x in a)} ({sum(a) / 3:.4f})   "
          f"{' '.join(f'{x:.4f}' for x in b)} ({sum(b) / 3:.4f})   {max(b) < max(a)!s:>5} "
          f"{sum(b) / 3 < sum(a) / 3!s:>5} {paired:+.4f}")
