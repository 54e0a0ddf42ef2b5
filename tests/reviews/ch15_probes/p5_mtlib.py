"""mtlib.models.transformer_xl: silent traps (non-causal masks, dtypes, eval memory for the absolute model, step cost)."""
import torch, time, warnings
torch.set_num_threads(1)
from mtlib.models.transformer_xl import TransformerXL, TransformerXLConfig, RelMultiHeadAttention, rel_shift
from mtlib.positional import sinusoidal_table
t0 = time.process_time()

def tiny(**kw):
    torch.manual_seed(0)
    m = TransformerXL(TransformerXLConfig(**{**dict(vocab_size=13, d_model=18, num_heads=3, d_ff=22, num_layers=2, seg_len=5, mem_len=5), **kw})).eval()
    with torch.no_grad():
        for p in m.parameters(): p.add_(0.3 * torch.randn_like(p))
    return m

# 1. a non-causal (bidirectional) mask is accepted: the entries above the diagonal are rel_shift junk
m = tiny()
idx = torch.randint(0, 13, (2, 5), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    _, mems = m(idx)
    full = torch.ones(5, 10, dtype=torch.bool)
    try:
        out, _ = m(idx, mems, mask=full)
        print("1. all-True (T, M+T) mask accepted, output finite:", bool(out.isfinite().all()))
    except Exception as e:
        print("1. refused:", type(e).__name__, e)
# what the junk is: the position score used for key j > i+M in row i
x = torch.arange(4 * 7, dtype=torch.float).view(4, 7)  # T=4, K=7 (M=3); column c = distance 6-c
print("   rel_shift junk row 0 (columns 4..6, future keys):", rel_shift(x)[0, 4:].tolist(),
      "= entries of row", "1 and a pad zero" )
print("   rel_shift input row 1:", x[1].tolist())

# 2. half precision / bfloat16 on CPU
m = tiny(); idx = torch.randint(0, 13, (3, 5), generator=torch.Generator().manual_seed(2))
with torch.no_grad():
    ref, rm = m(idx); ref2, _ = m(idx, rm)
    for dt in (torch.float16, torch.bfloat16):
        mh = tiny().to(dt)
        try:
            a, hm = mh(idx); b, _ = mh(idx, hm)
            print(f"2. {dt}: logits dtype {a.dtype}, max |diff| seg1 {(a.float()-ref).abs().max():.3g}, seg2 {(b.float()-ref2).abs().max():.3g}, table dtype {mh.table.dtype}, mems dtype {hm[0].dtype}")
        except Exception as e:
            print(f"2. {dt}: raised {type(e).__name__}: {e}")
    # float32 memories into a half model (e.g. memory kept from a float model)
    mh = tiny().half()
    try:
        b, _ = mh(idx, rm); print("   float32 mems into a float16 model: accepted, logits", b.dtype)
    except Exception as e:
        print("   float32 mems into a float16 model:", type(e).__name__, str(e)[:120])

# 3. the chapter's 'absolute' model with a longer memory at evaluation: allowed?
ma = tiny(positions="absolute")
mb = TransformerXL(TransformerXLConfig(**{**ma.config.__dict__, "mem_len": 20})).eval(); mb.load_state_dict(ma.state_dict())
with torch.no_grad():
    mems = None
    for s in range(5):
        _, mems = mb(torch.randint(0, 13, (2, 5)), mems)
print("3. absolute positions, memory 20 at eval (trained 5): runs, memory length", mems[0].shape[1])

# 4. train mode: memories hold dropped-out states; eval vs train memories differ
md = tiny(dropout=0.5).train()
with torch.no_grad():
    _, m1 = md(idx); _, m2 = md(idx)
print("4. train mode (dropout 0.5): two reads of the same segment give different memories:", not torch.equal(m1[0], m2[0]))

# 5. step cost: forward+backward of the chapter's text model, vanilla (mem 0) vs XL (mem 32)
def step_time(mem_len, n=15):
    torch.manual_seed(0)
    mm = TransformerXL(TransformerXLConfig.tiny(vocab_size=103, mem_len=mem_len))
    x = torch.randint(0, 103, (16, 32)); mems = None
    times = []
    for i in range(n):
        t = time.process_time()
        lg, mems = mm(x, mems); lg.logsumexp(-1).mean().backward()
        times.append(time.process_time() - t)
    return min(times[3:])
tv, tx = step_time(0), step_time(32)
print(f"5. train step (fwd+bwd), CPU: vanilla {tv*1e3:.1f} ms, XL mem 32 {tx*1e3:.1f} ms, ratio {tx/tv:.2f}")

# 6. the module docstring's reach 'layer n can see up to n * mem_len tokens back' vs T-1+L*Tm in the chapter
import mtlib.models.transformer_xl as mod
print("6. docstring:", [l.strip() for l in mod.__doc__.splitlines() if "tokens back" in l])
print("cpu s", round(time.process_time() - t0, 1))
