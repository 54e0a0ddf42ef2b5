# Probe 7: each ch14 checker against realistic wrong answers and correct variants; print the verdict + hint.
import torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib import exercises
def run(checker, name, fn):
    try:
        checker(fn); print(f"  PASS  {name}")
    except Exception as e:
        msg = str(e).split("\n"); hint = [m for m in msg if m.startswith("Hint")]
        print(f"  FAIL  {name}: {msg[0][:150]} | {hint[0] if hint else 'NO HINT'}")
print("== rms_norm")
R = exercises.check_rms_norm
run(R, "variant rsqrt", lambda x, w, eps: w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
run(R, "variant F.rms_norm", lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps))
run(R, "variant float32 compute", lambda x, w, eps: (w.float() * x.float() / (x.float() ** 2).mean(-1, keepdim=True).add(eps).sqrt()))
run(R, "variant norm * sqrt(d)", lambda x, w, eps: w * x / torch.sqrt(x.norm(dim=-1, keepdim=True) ** 2 / x.shape[-1] + eps))
run(R, "wrong: no eps at all", lambda x, w, eps: w * x / x.pow(2).mean(-1, keepdim=True).sqrt())
run(R, "wrong: mean over all elements", lambda x, w, eps: w * x / torch.sqrt(x.pow(2).mean() + eps))
run(R, "wrong: mean over dim 0", lambda x, w, eps: w * x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps))
run(R, "wrong: var(unbiased=False)", lambda x, w, eps: w * x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps))
run(R, "wrong: F.layer_norm * w", lambda x, w, eps: F.layer_norm(x, (x.shape[-1],), w, None, eps))
run(R, "wrong: abs-mean instead of RMS", lambda x, w, eps: w * x / (x.abs().mean(-1, keepdim=True) + eps))
run(R, "wrong: eps*d inside (sum form)", lambda x, w, eps: w * x * (x.shape[-1] ** 0.5) / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps))
run(R, "wrong: gain added, not multiplied", lambda x, w, eps: w + x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps))
run(R, "wrong: no keepdim (shape error)", lambda x, w, eps: w * x / torch.sqrt(x.pow(2).mean(-1) + eps)[..., None].squeeze(-1))
run(R, "wrong: in-place x.div_", lambda x, w, eps: x.div_(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)).mul_(w))
run(R, "wrong: multiplies by the rms", lambda x, w, eps: w * x * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps))

print("== sentinel_spans")
C = exercises.check_sentinel_spans
def ref(tokens, noise, s):
    ins, outs, k, i, T = [], [], 0, 0, len(tokens)
    while i < T:
        if noise[i]:
            j = i
            while j < T and noise[j]: j += 1
            ins.append(s[k]); outs += [s[k], *tokens[i:j].tolist()]; k += 1; i = j
        else:
            ins.append(int(tokens[i])); i += 1
    return ins, outs
run(C, "variant lists", ref)
run(C, "variant tensors", lambda t, n, s: tuple(torch.tensor(a) for a in ref(t, n, s)))
def vec(tokens, noise, s):
    starts = noise & ~torch.cat([torch.tensor([False]), noise[:-1]])
    sid = torch.tensor(s)[(starts.cumsum(0) - 1).clamp(min=0)]
    ins = torch.where(starts, sid, tokens)[~noise | starts]
    outs = []
    for i in range(len(tokens)):
        if starts[i]: outs.append(int(sid[i]))
        if noise[i]: outs.append(int(tokens[i]))
    return ins, torch.tensor(outs)
run(C, "variant vectorised", vec)
run(C, "variant (tensors, int32)", lambda t, n, s: tuple(torch.tensor(a, dtype=torch.int32) for a in ref(t, n, s)))
def per_token(t, n, s):
    return [s[0] if f else int(x) for x, f in zip(t, n)], [y for x, f in zip(t, n) if f for y in (s[0], int(x))]
run(C, "wrong: one sentinel per noise token", per_token)
run(C, "wrong: same sentinel every span", lambda t, n, s: ref(t, n, [s[0]] * 10))
run(C, "wrong: sentinels numbered from the end", lambda t, n, s: ref(t, n, list(reversed(s))))
run(C, "wrong: eos appended to target", lambda t, n, s: (ref(t, n, s)[0], ref(t, n, s)[1] + [1]))
run(C, "wrong: eos appended to both", lambda t, n, s: (ref(t, n, s)[0] + [1], ref(t, n, s)[1] + [1]))
run(C, "wrong: closing sentinel after last span (paper's Fig 2)", lambda t, n, s: (ref(t, n, s)[0], ref(t, n, s)[1] + [s[len([1 for i in range(len(n)) if n[i] and (i == 0 or not n[i-1])])]]))
def forget_last(t, n, s):  # the loop only flushes a span when it meets a clean token
    ins, outs, k, cur = [], [], 0, None
    for x, f in zip(t.tolist(), n.tolist()):
        if f:
            if cur is None: cur = [x]; ins.append(s[k])
            else: cur.append(x)
        else:
            if cur is not None: outs += [s[k], *cur]; k += 1; cur = None
            ins.append(x)
    return ins, outs
run(C, "wrong: last span not flushed", forget_last)
run(C, "wrong: spans in target, no sentinels", lambda t, n, s: (ref(t, n, s)[0], [int(x) for x, f in zip(t, n) if f]))
run(C, "wrong: sentinel AFTER its span in target", lambda t, n, s: (ref(t, n, s)[0], None) and (ref(t, n, s)[0], swap(ref(t, n, s)[1], s)))
def swap(outs, s):
    res, buf, cur = [], [], None
    for x in outs:
        if x in s:
            if cur is not None: res += buf + [cur]
            cur, buf = x, []
        else: buf.append(x)
    return res + buf + [cur]
run(C, "wrong: input keeps noise tokens + sentinel", lambda t, n, s: ([y for i, (x, f) in enumerate(zip(t.tolist(), n.tolist())) for y in ([s[0]] if f and (i == 0 or not n[i-1]) else []) + [x]], ref(t, n, s)[1]))
run(C, "wrong: mutates tokens in place", lambda t, n, s: (t.__setitem__(n, -1), ref(t, n, s))[1])

print("== text_infilling")
I = exercises.check_text_infilling
def inf(tokens, spans, m):
    out, i, st = [], 0, dict(spans)
    tok = tokens.tolist()
    while i <= len(tok):
        if i in st:
            out.append(m); i += st.pop(i)
            if i < len(tok): out.append(tok[i])
            i += 1; continue
        if i < len(tok): out.append(tok[i])
        i += 1
    return out
run(I, "variant loop", inf)
def inf2(tokens, spans, m):
    pieces, prev = [], 0
    for s, n in spans:
        pieces += [tokens[prev:s], torch.tensor([m])]; prev = s + n
    pieces.append(tokens[prev:])
    return torch.cat(pieces)
run(I, "variant slices + cat", inf2)
def inf3(tokens, spans, m):
    out = tokens.tolist()
    for s, n in reversed(spans):
        out[s:s + n] = [m]
    return out
run(I, "variant reversed slice assignment", inf3)
def per_tok(tokens, spans, m):
    out = tokens.tolist()
    for s, n in spans: out[s:s+n] = [m] * n
    return out
run(I, "wrong: one mask per token", per_tok)
run(I, "wrong: deletion", lambda t, sp, m: [x for i, x in enumerate(t.tolist()) if not any(s <= i < s + n for s, n in sp)])
run(I, "wrong: zero spans skipped", lambda t, sp, m: inf3(t, [(s, n) for s, n in sp if n > 0], m))
def forward_assign(tokens, spans, m):  # slices assigned left to right: later starts shift
    out = tokens.tolist()
    for s, n in spans: out[s:s + n] = [m]
    return out
run(I, "wrong: left-to-right slice assignment (index drift)", forward_assign)
def zero_replaces(tokens, spans, m):  # length-0 span replaces tokens[start] instead of inserting
    out = tokens.tolist()
    for s, n in reversed(spans): out[s:s + max(n, 1)] = [m]
    return out
run(I, "wrong: length 0 replaces a token", zero_replaces)
def end_dropped(tokens, spans, m):  # loop over range(len(tokens)) only: a span at T is lost
    out, i, st = [], 0, dict(spans)
    tok = tokens.tolist()
    while i < len(tok):
        if i in st:
            out.append(m); i += st.pop(i); continue
        out.append(tok[i]); i += 1
    return out
run(I, "wrong: loop stops at T (span at the end lost)", end_dropped)
run(I, "wrong: mask after zero span", lambda t, sp, m: inf3(t, [(s + 1 if n == 0 else s, n) for s, n in sp], m))
run(I, "wrong: masks appended in front", lambda t, sp, m: [m] * len(sp) + [x for i, x in enumerate(t.tolist()) if not any(s <= i < s + n for s, n in sp)])
