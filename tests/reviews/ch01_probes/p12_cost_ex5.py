# Cell 44's cost claim measured as time and memory; exercise 5 (temperature) on the pinned seed-0 model.
import time, torch
from defs import *
m = build("with attention"); m.load_state_dict(torch.load("ckpt/with_attention_0_pinned.pt")); m.eval()
def clock(f, reps=3):
    f(); t = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t) / reps
print("forward time, batch 64 (one thread): encoder GRU+decoder GRU vs the additive scorer, and the scorer's hidden tensor")
with torch.no_grad():
    for T in (20, 80, 320):
        src = torch.randint(3, 13, (64, T)); L = torch.full((64,), T)
        emb = m.embed(src)
        t_gru = clock(lambda: (m.encoder(emb), m.decoder(emb)))
        states = torch.randn(64, T, 128); dec = torch.randn(64, T, 64)
        t_att = clock(lambda: m.attention(dec, states, states))
        print(f"T={T:>3}: GRUs {t_gru*1e3:7.1f} ms, scorer {t_att*1e3:7.1f} ms (ratio {t_att/t_gru:4.2f}); hidden tensor {64*T*T*64*4/2**20:7.1f} MiB")
print("exercise 5: token accuracy at length 20 with the scores divided by tau")
w0 = m.attention.score_proj.weight.data.clone()
for tau in (0.5, 1, 2, 4, 8, 16, 64):
    m.attention.score_proj.weight.data = w0 / tau
    print(f"  tau={tau:<4} tokens {eval_batch(m, 20, n=200)[3].float().mean():.2f}")
