# RoPE vs Hugging Face Llama; half precision; large positions; Marian's sinusoidal layout.
import math, time, torch
torch.set_num_threads(1)
t0 = time.process_time()
from mtlib.positional import RotaryEmbedding, sinusoidal_table, SinusoidalEncoding
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

print("== P2a: mtlib RotaryEmbedding vs HF Llama apply_rotary_pos_emb (rotate-half), B=2 H=3 T=7 Dh=10")
cfg = LlamaConfig(hidden_size=30, num_attention_heads=3, head_dim=10, max_position_embeddings=8192, rope_theta=10000.0)
hf_rope = LlamaRotaryEmbedding(cfg)
g = torch.Generator().manual_seed(0)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for offset in (0, 100, 4000):
        q = torch.randn(2, 3, 7, 10, generator=g).to(dtype); k = torch.randn(2, 3, 7, 10, generator=g).to(dtype)
        pos = torch.arange(offset, offset + 7)[None].expand(2, -1)
        cos, sin = hf_rope(q, pos)
        hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
        ours = RotaryEmbedding(10, max_len=8192)
        oq = ours.rotate(q, layout="BHTD", offset=offset)
        # exact float64 reference
        ref = RotaryEmbedding(10, max_len=8192)
        ref.cos, ref.sin = ref.cos.double(), ref.sin.double()
        # rebuild float64 tables
        inv = 10000 ** (-torch.arange(0, 10, 2, dtype=torch.float64) / 10)
        ang = torch.arange(8192, dtype=torch.float64)[:, None] * inv; ang = torch.cat([ang, ang], -1)
        ref.cos, ref.sin = ang.cos(), ang.sin()
        rq = ref.rotate(q.double(), layout="BHTD", offset=offset)
        print(f"  {str(dtype):>14} offset {offset:>4}: |ours-HF| max {(oq.double()-hq.double()).abs().max().item():.2e}; "
              f"|ours-fp64| {(oq.double()-rq).abs().max().item():.2e}; |HF-fp64| {(hq.double()-rq).abs().max().item():.2e}")

print("\n== P2b: RoPE's offset invariance (cell 15) in half precision: scores at positions p vs p+100 / p+3000")
re = RotaryEmbedding(8, max_len=4096)
q = torch.randn(2, 3, 7, 8, generator=g); k = torch.randn(2, 3, 7, 8, generator=g)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    s0 = re.rotate(q.to(dtype), layout="BHTD") @ re.rotate(k.to(dtype), layout="BHTD").transpose(-2, -1)
    for shift in (100, 3000):
        s1 = re.rotate(q.to(dtype), layout="BHTD", offset=shift) @ re.rotate(k.to(dtype), layout="BHTD", offset=shift).transpose(-2, -1)
        print(f"  {str(dtype):>14} shift {shift:>4}: max |scores change| = {(s1.float()-s0.float()).abs().max().item():.3f} (scores up to {s0.float().abs().max().item():.1f})")

print("\n== P2c: sinusoidal table in bfloat16/float16: distinct rows over 512 and 4096 positions; PE added to a token vector")
for n in (512, 4096):
    pe = sinusoidal_table(n, 32)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        p = pe.to(dtype).double()
        dist = torch.cdist(p, p) + torch.eye(n, dtype=torch.float64) * 1e9
        print(f"  {n} rows {str(dtype):>14}: closest two rows {dist.min().item():.3f} apart")
layer = SinusoidalEncoding(32, max_len=4096)
x = torch.randn(1, 4096, 32, generator=g) * math.sqrt(32)  # an embedding scaled by sqrt(d_model) as in the paper
for dtype in (torch.float32, torch.bfloat16):
    out = layer(x.to(dtype)).double() - x.to(dtype).double()
    print(f"  x*sqrt(d) + PE in {dtype}: recovered PE error max {(out - layer.pe.double()).abs().max().item():.3f}, "
          f"adjacent positions 4000/4001 recovered-PE distance {(out[0,4000]-out[0,4001]).norm().item():.3f} (exact {(layer.pe[4000]-layer.pe[4001]).norm().item():.3f})")

print("\n== P2d: Hugging Face Marian's sinusoidal table: [sin | cos] halves (the checker's 'mistake')")
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
m = MarianSinusoidalPositionalEmbedding(50, 6)
try:
    w = m.create_weight() if hasattr(m, "create_weight") else None
except Exception:
    w = None
if w is None:
    m._init_weight() if hasattr(m, "_init_weight") else None
    w = m.weight
ref = sinusoidal_table(50, 6)
halves = torch.cat([ref[:, 0::2], ref[:, 1::2]], -1)
print("  Marian == interleaved:", torch.allclose(w.double(), ref, atol=1e-6), "; Marian == [sin|cos] halves:", torch.allclose(w.double(), halves, atol=1e-6))
print(f"cpu seconds: {time.process_time() - t0:.1f}")
