# Probe: "transformers' time per token grew with the length ... where that growth comes from we
# have not measured" (cell 37). Its default DynamicCache grows by torch.cat (cache_utils.py,
# DynamicLayer.update). Patch it to grow in place (doubling buffer) and time both, interleaved.
import sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
import transformers
from transformers import cache_utils
from mtlib.models import GPT
cfg = transformers.GPT2Config(vocab_size=1024, n_positions=1024, n_embd=256, n_layer=4, n_head=4,
                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=0)
torch.manual_seed(0)
hf = transformers.GPT2LMHeadModel(cfg).eval()
ours = GPT.from_hf(hf).eval()
prompt = torch.randint(0, 1024, (1, 8), generator=torch.Generator().manual_seed(0))
original = cache_utils.DynamicLayer.update
def inplace_update(self, key_states, value_states, *args, **kwargs):
    if not self.is_initialized:
        self.lazy_initialization(key_states, value_states)
        self._t = 0
    t, new = self._t, key_states.shape[-2]
    buf = getattr(self, "_buf", None)
    if buf is None or buf[0].shape[-2] < t + new:
        size = (*key_states.shape[:-2], max(2 * (t + new), 16), key_states.shape[-1])
        nb = (key_states.new_empty(size), value_states.new_empty(size))
        if t:
            nb[0][..., :t, :] = self.keys; nb[1][..., :t, :] = self.values
        self._buf = buf = nb
    buf[0][..., t:t + new, :] = key_states; buf[1][..., t:t + new, :] = value_states
    self._t = t + new
    self.keys, self.values = buf[0][..., :t + new, :], buf[1][..., :t + new, :]
    return self.keys, self.values
def hf_gen(n):
    with torch.inference_mode():
        return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, use_cache=True, pad_token_id=0)
def timed(fn):
    s = time.perf_counter(); out = fn(); return time.perf_counter() - s, out
hf_gen(4); ours.generate(prompt, 4)
res = {}
for n in (128, 512):
    for rep in range(2):
        cache_utils.DynamicLayer.update = original
        t1, a = timed(lambda: hf_gen(n))
        cache_utils.DynamicLayer.update = inplace_update
        t2, b = timed(lambda: hf_gen(n))
        cache_utils.DynamicLayer.update = original
        t3, c = timed(lambda: ours.generate(prompt, n))
        assert torch.equal(a, b) and torch.equal(a, c)
        for key, t in (("transformers, DynamicCache (torch.cat)", t1), ("transformers, patched in place", t2), ("mtlib KVCache", t3)):
            res.setdefault((key, n), []).append(1e3 * t / n)
    print(f"n={n} done", flush=True)
for (key, n), ts in res.items():
    print(f"{key:<40} {n:>4} new tokens: {min(ts):5.2f} ms/token (best of 2; runs {[round(x, 2) for x in ts]})")
print("same tokens in every run: True")
