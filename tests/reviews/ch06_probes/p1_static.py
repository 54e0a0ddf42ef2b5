# Cheap static probes (no training): causal mask & order, figure-20 identity, T5 buckets vs HF,
# bucket edges, init scales, numeric nits.
import math, time, torch
torch.set_num_threads(1)
t0 = time.process_time()
from mtlib.attention import MultiHeadAttention
from mtlib.positional import (RelativePositionBias, RotaryEmbedding, SinusoidalEncoding,
                              sinusoidal_table, alibi_slopes, alibi_bias, LearnedEncoding)

print("== P1a: cell 3/4 claim 'no layer built on top can tell who bit whom' under a causal mask")
torch.manual_seed(0)
d = 16
mha = MultiHeadAttention(d, num_heads=2).eval()
words = {w: torch.randn(d) for w in ("dog", "bites", "man")}
emb = lambda s: torch.stack([words[w] for w in s.split()])[None]
for causal in (False, True):
    a = mha(emb("dog bites man"), is_causal=causal)[0][0]; b = mha(emb("man bites dog"), is_causal=causal)[0][0]
    for i, j, w in ((0, 2, "dog"), (1, 1, "bites"), (2, 0, "man")):
        print(f"  causal={causal} '{w}': |a-b|/|a| = {((a[i]-b[j]).norm()/a[i].norm()).item():.3g}  max|a-b| = {(a[i]-b[j]).abs().max().item():.2e}")
# fused vs explicit path: is it 'exactly 0'?
a = mha(emb("dog bites man"), need_weights=True)[0][0]; b = mha(emb("man bites dog"), need_weights=True)[0][0]
print("  explicit path, no mask: max |a-b| =", (a[[0,1,2]] - b[[2,1,0]]).abs().max().item())

print("\n== P1b: figure cell 20: is the RoPE panel (q=k=1) just the sinusoidal panel / 16?")
sims = sinusoidal_table(65, 32)[0] @ sinusoidal_table(65, 32).T
ones = torch.ones(1, 1, 65, 32)
rot = RotaryEmbedding(32).rotate(ones, layout="BHTD")
rope_curve = (rot[0, 0, 0] @ rot[0, 0].T) / 32
print("  max |rope_curve - sims/16| =", (rope_curve.double() - sims / 16).abs().max().item())
# RoPE 'decay' for random q, k (what attention actually sees)
g = torch.Generator().manual_seed(0)
n = 4000
q = torch.randn(n, 1, 1, 32, generator=g); k = torch.randn(n, 1, 1, 32, generator=g)
re = RotaryEmbedding(32, max_len=600)
qr = re.rotate(q, layout="BHTD")  # position 0
ks = {}
for dist in (0, 1, 4, 16, 64, 256, 512):
    kr = re.rotate(k, layout="BHTD", offset=dist)
    s_ind = (qr * kr).sum(-1).flatten() / math.sqrt(32)
    kr_same = re.rotate(q, layout="BHTD", offset=dist)
    s_same = (qr * kr_same).sum(-1).flatten() / math.sqrt(32)
    ks[dist] = (s_ind.mean().item(), s_ind.abs().mean().item(), s_same.mean().item())
print("  distance: mean score (q,k independent) | mean |score| (independent) | mean score (k = q)")
for dist, (m1, m2, m3) in ks.items():
    print(f"   {dist:>4}: {m1:+.3f} | {m2:.3f} | {m3:+.3f}")

print("\n== P1c: T5 buckets vs Hugging Face T5Attention._relative_position_bucket")
from transformers.models.t5.modeling_t5 import T5Attention
rel = torch.arange(-1500, 1500)
for bidi, nb, md in ((False, 32, 128), (True, 32, 128), (False, 32, 32), (True, 8, 20)):
    ours = RelativePositionBias.bucket(rel, bidirectional=bidi, num_buckets=nb, max_distance=md)
    hf = T5Attention._relative_position_bucket(rel, bidirectional=bidi, num_buckets=nb, max_distance=md)
    last = nb - 1 if not bidi else nb // 2 - 1
    # first distance that lands in the last bucket (keys before the query: rel < 0)
    dist = -rel[rel <= 0]; b = ours[rel <= 0]
    first_last = dist[b == last].min().item()
    print(f"  bidirectional={bidi} buckets={nb} max_distance={md}: equal to HF: {torch.equal(ours, hf)}; "
          f"last bucket {last} starts at distance {first_last} (docstring: 'from max_distance')")

print("\n== P1d: init scales of the position parameters (the study's unseen rows/buckets keep them)")
rpb = RelativePositionBias(4, bidirectional=False)
print(f"  RelativePositionBias init std: {rpb.relative_attention_bias.weight.std().item():.2f}  "
      f"(HF T5 _init_weights: factor * d_model**-0.5 = {32 ** -0.5:.3f} for d_model = 32)")
le = LearnedEncoding(32, 64)
print(f"  LearnedEncoding init std: {le.embedding.weight.std().item():.2f} (row norm {le.embedding.weight.norm(dim=-1).mean():.2f}); "
      "GPT-2/HF init std 0.02 (wpe)")

print("\n== P1e: numeric nits")
print("  333 - 53*2pi =", 333 - 53 * 2 * math.pi)
print("  k=1: 1 rad; k=7: 7 - 2pi =", 7 - 2 * math.pi, "rad;  k=6: 6-2pi =", 6 - 2 * math.pi, "; k=19:", 19 - 6 * math.pi, "; k=44:", 44 - 14 * math.pi)
print("  last sinusoidal period for d=32: 2pi*10000^(30/32) =", 2 * math.pi * 10000 ** (30 / 32))
try:
    torch.nn.Embedding(20, 4)(torch.tensor([25]))
except Exception as e:
    print("  nn.Embedding with index 25 of 20 rows:", type(e).__name__, str(e)[:60])
try:
    RotaryEmbedding(8).rotate(torch.randn(5, 7, 8), layout="BHTD")
except Exception as e:
    print("  RotaryEmbedding.rotate on a 3-D (..., T, Dh) tensor (docstring 'Shape: rotate: x (..., T, Dh)'):", type(e).__name__, str(e)[:80])
print("  alibi slopes H=6:", [round(s, 4) for s in alibi_slopes(6).tolist()])
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
for H in (4, 6, 8, 12):
    am = torch.ones(1, 10)
    hf = build_alibi_tensor(am, H, torch.float64)  # (B*H, 1, T): slope * position
    hf_slopes = hf[:, 0, 1]  # slope * 1
    print(f"  H={H}: slopes equal to Bloom's build_alibi_tensor: {torch.allclose(hf_slopes, alibi_slopes(H))}")
print(f"cpu seconds: {time.process_time() - t0:.1f}")
