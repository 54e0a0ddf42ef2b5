# mtlib probes: FLOP counts on the fused path and with a causal mask; parity with PyTorch's inference fast path; half precision.
import torch, torch.nn as nn
torch.set_num_threads(1)
from torch.utils.flop_counter import FlopCounterMode
from mtlib.blocks import BlockConfig, EncoderBlock, FeedForward
from mtlib import masks
torch.manual_seed(0)
def flops(block, T, **kw):
    x = torch.randn(1, T, block.d_model)
    with FlopCounterMode(display=False) as c:
        block(x, **kw)
    return c.get_total_flops()
d, dff, T = 64, 256, 256
blk = EncoderBlock(BlockConfig(d_model=d, num_heads=4, d_ff=dff, dropout=0.0)).eval()
formula = T * (2 * (4 * d * d + 2 * d * dff) + 4 * T * d)
for fused in (False, True):
    blk.self_attn.fused = fused
    print(f"fused={fused}: counted {flops(blk, T):,}  causal {flops(blk, T, is_causal=True):,}  formula {formula:,}")
# parity with nn.TransformerEncoderLayer, in eval mode under no_grad (PyTorch's fast path), with padding
for nf in (False, True):
    ref = nn.TransformerEncoderLayer(12, 3, 20, dropout=0.1, norm_first=nf, batch_first=True).eval()
    ours = EncoderBlock.from_torch(ref).eval()
    x = torch.randn(2, 5, 12)
    kpm = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])  # PyTorch: True = pad
    with torch.no_grad():
        a = ref(x, src_key_padding_mask=kpm)
        b = ours(x, mask=masks.from_key_padding_mask(kpm))
    real = ~kpm
    print(f"norm_first={nf}: fast path vs mtlib, real tokens max diff {(a[real] - b[real]).abs().max():.1e}, "
          f"padded positions max diff {(a[~real] - b[~real]).abs().max():.1e}")
# half precision on the CPU: block output error vs float32
blk32 = EncoderBlock(BlockConfig(d_model=48, num_heads=6, d_ff=80, dropout=0.0, norm_first=True)).eval()
x = torch.randn(2, 37, 48)
ref = blk32(x)
for dt in (torch.bfloat16, torch.float16):
    for fused in (False, True):
        b = EncoderBlock(BlockConfig(d_model=48, num_heads=6, d_ff=80, dropout=0.0, norm_first=True)).eval()
        b.load_state_dict(blk32.state_dict()); b = b.to(dt); b.self_attn.fused = fused
        out = b(x.to(dt)).float()
        print(f"{dt} fused={fused}: max |out - float32| {(out - ref).abs().max():.2e}, dtype out {b(x.to(dt)).dtype}")
# SwiGLU width trap: FeedForward(d, 4d, 'swiglu') has 1.5x the weights of relu
for act in ("relu", "swiglu"):
    print(act, "params at d_ff=4d:", sum(p.numel() for p in FeedForward(64, 256, activation=act).parameters()))
