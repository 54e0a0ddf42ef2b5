# The decoding-position bug for bias schemes: a per-step bias built for (1 query, 1 key) broadcasts silently.
import torch
torch.set_num_threads(1)
from mtlib.attention import MultiHeadAttention, KVCache
from mtlib.positional import alibi_bias, RelativePositionBias
torch.manual_seed(0)
mha = MultiHeadAttention(32, num_heads=4).eval(); x = torch.randn(1, 10, 32)
rpb = RelativePositionBias(4, bidirectional=False)
with torch.no_grad():
    for name, full_bias, right, bug in (
        ("alibi", alibi_bias(4, 10), lambda t: alibi_bias(4, 1, t + 1), lambda t: alibi_bias(4, 1)),
        ("t5", rpb(10), lambda t: rpb(1, t + 1), lambda t: rpb(1)),
    ):
        full = mha(x, bias=full_bias, is_causal=True)[0]
        nopos = mha(x, is_causal=True)[0]
        outs = {}
        for label, f in (("right", right), ("bug", bug)):
            cache = KVCache()
            outs[label] = torch.cat([mha(x[:, t:t + 1], bias=f(t), cache=cache)[0] for t in range(10)], 1)
        print(f"{name}: bias shape per step with the bug {tuple(bug(3).shape)}; max |right - full| {(outs['right'] - full).abs().max():.1e}; "
              f"bug vs full: relative error per step {[round(v, 2) for v in ((outs['bug'] - full).norm(dim=-1) / full.norm(dim=-1))[0].tolist()]}; "
              f"max |bug - no positions at all| {(outs['bug'] - nopos).abs().max():.1e}")
    # and without a cache: a (1, H, 1, 1) bias on a full (T, T) call
    out = mha(x, bias=alibi_bias(4, 1), is_causal=True)[0]
    print("no cache, alibi_bias(4, 1) on a 10-token call: accepted; max |out - no positions| =", f"{(out - mha(x, is_causal=True)[0]).abs().max():.1e}")
