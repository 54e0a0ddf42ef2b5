# Where does the sinusoidal model fail beyond L? Layer-by-layer attention to the key 1 back (1-back task).
import time, torch
torch.set_num_threads(1)
t0 = time.process_time()
from mtlib.experiments import extrapolation as ex
c1 = ex.ExtrapolationConfig(shift=1)
res = {}
for scheme in ("sinusoidal", "learned"):
    m = ex.train(scheme, 0, c1)
    tokens, _ = ex.make_batch(256, 64, c1, torch.Generator().manual_seed(7))
    with torch.no_grad():
        x = m.absolute(m.embed(tokens))
        for li, layer in enumerate(m.layers):
            h = layer.norm1(x)
            out, w = layer.attn(h, is_causal=True, need_weights=True, average_attn_weights=False)  # (B, H, T, T)
            t = torch.arange(1, 64)
            back1 = w[:, :, t, t - 1]  # (B, H, 63): weight on the key one back
            best = back1.mean(0).max(0).values  # the head that attends most to t-1, per position
            print(f"{scheme:>10} layer {li}: max-over-heads mean weight on key t-1 at positions 1-31 {best[:31].mean():.2f}, "
                  f"32-47 {best[31:47].mean():.2f}, 48-63 {best[47:].mean():.2f}")
            x = x + out
            x = x + layer.ff(layer.norm2(x))
print(f"cpu seconds: {time.process_time() - t0:.1f}")
