import torch
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.masks import causal_mask
from mtlib.data import encode_numbers, PAD
m, _ = tr.load_checkpoint()
b = encode_numbers(torch.tensor([123456, 654321, 777777]))
tin, _ = tr.shift_right(b.tgt)          # T = 9 + ... 
S = b.src.shape[1]
win = torch.ones(S, S, dtype=torch.bool).tril(1).triu(-1)  # a banded encoder mask (S, S)
pad = (b.src != PAD)[:, None, None, :]
enc_mask = (win[None, None] & pad)        # (B, 1, S, S): encoder self-attention mask, as the docstring allows
print("S =", S, "T =", tin.shape[1])
for T in (tin.shape[1], S):
    x = tin[:, :T]
    try:
        with torch.no_grad():
            out = m(b.src, x, src_mask=enc_mask)
            ref_mem = m.encode(b.src, src_mask=enc_mask)
            proper = m.decode(x, ref_mem, memory_mask=pad)   # cross-attention with only the padding mask
        print(f"T={T}: ran; max |forward(src_mask=(B,1,S,S)) - decode with padding-only memory mask| = {(out-proper).abs().max().item():.3f}")
    except Exception as e:
        print(f"T={T}: raises {type(e).__name__}: {str(e)[:160]}")
