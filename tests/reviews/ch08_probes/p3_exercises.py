import torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib import exercises
def run(name, checker, fn):
    try:
        checker(fn); res = "PASSED"
    except AssertionError as e:
        res = "REJECTED: " + str(e).replace("\n", " | ")[:330]
    except Exception as e:
        res = f"CRASH {type(e).__name__}: {e}"[:300]
    print(f"  [{name}] {res}")

print("=== shift_right: wrong answers")
W = {
 "literal 'BOS y1..yn' (EOS dropped, pad kept)": lambda l,b: torch.cat([torch.full_like(l[:, :1], b), l[:, :-1].masked_fill(l[:, :-1]==2, 0)],1),
 "hard-coded BOS=1": lambda l,b: torch.cat([torch.ones_like(l[:, :1]), l[:, :-1]],1),
 "roll without setting BOS": lambda l,b: l.roll(1, dims=1),
 "BOS replaces first label (no shift)": lambda l,b: torch.cat([torch.full_like(l[:, :1], b), l[:, 1:]],1),
 "in-place overlapping copy": (lambda l,b: (l.__setitem__((slice(None), slice(1,None)), l[:, :-1]), l.__setitem__((slice(None),0), b), l)[-1]),
 "int32 result": lambda l,b: torch.cat([torch.full_like(l[:, :1], b), l[:, :-1]],1).int(),
 "shift by two": lambda l,b: torch.cat([torch.full_like(l[:, :2], b), l[:, :-2]],1),
 "returns (input, labels) tuple like tr.shift_right": lambda l,b: (torch.cat([torch.full_like(l[:, :1], b), l[:, :-1]],1), l),
}
for k,f in W.items(): run(k, exercises.check_shift_right, f)
print("=== shift_right: correct variants")
V = {
 "F.pad": lambda l,b: F.pad(l, (1,0), value=b)[:, :-1],
 "new_full + cat": lambda l,b: torch.cat([l.new_full((l.shape[0],1), b), l[:, :-1]], 1),
 "clone + slice assign": lambda l,b: (lambda o: (o.__setitem__((slice(None), slice(1,None)), l[:, :-1]), o.__setitem__((slice(None),0), b), o)[-1])(torch.empty_like(l)),
 "on device of labels (torch.tensor of list)": lambda l,b: torch.tensor([[b]+r[:-1] for r in l.tolist()]),
}
for k,f in V.items(): run(k, exercises.check_shift_right, f)

print("=== greedy: wrong answers")
def g_base(step, bos_id, eos_id, max_len, stop_early=0, force_eos=False, tensor_items=False, eos_check_before=False, prefix_tensor=False):
    toks=[bos_id]
    while len(toks) < max_len - stop_early:
        s = step(torch.tensor(toks) if prefix_tensor else list(toks))
        t = s.argmax() if tensor_items else int(s.argmax())
        toks.append(t)
        if int(t)==eos_id: break
    if force_eos and toks[-1]!=eos_id: toks[-1]=eos_id
    return toks
GW = {
 "one too few (max_len-1 tokens)": lambda step,*,bos_id,eos_id,max_len: g_base(step,bos_id,eos_id,max_len,stop_early=1),
 "forces EOS at the end": lambda step,*,bos_id,eos_id,max_len: g_base(step,bos_id,eos_id,max_len,force_eos=True),
 "0-d tensors in the list": lambda step,*,bos_id,eos_id,max_len: g_base(step,bos_id,eos_id,max_len,tensor_items=True),
 "softmax over ... then sample (not greedy)": lambda step,*,bos_id,eos_id,max_len: [bos_id]+[int(torch.multinomial(step([bos_id]).softmax(-1),1))],
 "never appends EOS but stops (checks before append)": None,
 "re-decodes from scratch each step (calls step t times per token)": None,
 "positional max_len/bos (signature without *)": lambda step, bos_id, eos_id, max_len: g_base(step,bos_id,eos_id,max_len),
}
def no_eos(step,*,bos_id,eos_id,max_len):
    toks=[bos_id]
    while len(toks)<max_len:
        t=int(step(toks).argmax())
        if t==eos_id: break
        toks.append(t)
    return toks
GW["never appends EOS but stops (checks before append)"]=no_eos
def quadratic(step,*,bos_id,eos_id,max_len):
    toks=[bos_id]
    while len(toks)<max_len:
        for i in range(1,len(toks)+1): s=step(toks[:i])
        t=int(s.argmax()); toks.append(t)
        if t==eos_id: break
    return toks
GW["re-decodes from scratch each step (calls step t times per token)"]=quadratic
for k,f in GW.items(): run(k, exercises.check_greedy_decode, f)
print("=== greedy: correct variants")
GV = {
 "prefix as tensor": lambda step,*,bos_id,eos_id,max_len: g_base(step,bos_id,eos_id,max_len,prefix_tensor=True),
 "for range(max_len-1)": None,
 "torch.topk(1)": None,
}
def g_for(step,*,bos_id,eos_id,max_len):
    toks=[bos_id]
    for _ in range(max_len-1):
        toks.append(int(torch.argmax(step(toks))))
        if toks[-1]==eos_id: break
    return toks
def g_topk(step,*,bos_id,eos_id,max_len):
    toks=[bos_id]
    while len(toks)<max_len and (len(toks)==1 or toks[-1]!=eos_id):
        toks.append(step(toks).topk(1).indices.item())
    return toks
GV["for range(max_len-1)"]=g_for; GV["torch.topk(1)"]=g_topk
for k,f in GV.items(): run(k, exercises.check_greedy_decode, f)

print("=== label smoothing: wrong answers")
def q_of(logits, targets, eps):
    V=logits.shape[-1]; return (1-eps)*F.one_hot(targets,V).to(logits.dtype)+eps/V
LW = {
 "eps instead of eps/V": lambda lg,t,e: (-( ((1-e)*F.one_hot(t,lg.shape[-1]).to(lg.dtype)+e) * lg.log_softmax(-1)).sum(-1)).mean(),
 "mean over classes too (/V)": lambda lg,t,e: (-(q_of(lg,t,e)*lg.log_softmax(-1))).mean(),
 "log(softmax) (overflow)": lambda lg,t,e: (-(q_of(lg,t,e)*lg.softmax(-1).log()).sum(-1)).mean(),
 "softmax over rows (dim=0)": lambda lg,t,e: (-(q_of(lg,t,e)*lg.log_softmax(0)).sum(-1)).mean(),
 "KL(q||p) without the entropy term": lambda lg,t,e: F.kl_div(lg.log_softmax(-1), q_of(lg,t,e), reduction="batchmean"),
 "returns per-row losses (N,)": lambda lg,t,e: (-(q_of(lg,t,e)*lg.log_softmax(-1)).sum(-1)),
 "logits instead of log-probs": lambda lg,t,e: (-(q_of(lg,t,e)*lg).sum(-1)).mean(),
 "eps on true class only: (1-eps)onehot, no uniform": lambda lg,t,e: (-( (1-e)*F.one_hot(t,lg.shape[-1]).to(lg.dtype) * lg.log_softmax(-1)).sum(-1)).mean(),
 "float32 with log_softmax after .float()": None,
}
LW.pop("float32 with log_softmax after .float()")
for k,f in LW.items(): run(k, exercises.check_label_smoothing_loss, f)
print("=== label smoothing: correct variants")
LV = {
 "explicit q": lambda lg,t,e: (-(q_of(lg,t,e)*lg.log_softmax(-1)).sum(-1)).mean(),
 "(1-e)*nll + e*mean(-logp)": lambda lg,t,e: ((1-e)*F.nll_loss(lg.log_softmax(-1), t, reduction='none') + e*(-lg.log_softmax(-1)).mean(-1)).mean(),
 "KL + entropy": lambda lg,t,e: F.kl_div(lg.log_softmax(-1), q_of(lg,t,e), reduction="batchmean") + (-(q_of(lg,t,e)*q_of(lg,t,e).clamp_min(1e-30).log()).sum(-1)).mean(),
 "logsumexp form": lambda lg,t,e: (torch.logsumexp(lg,-1) - (q_of(lg,t,e)*lg).sum(-1)).mean(),
}
for k,f in LV.items(): run(k, exercises.check_label_smoothing_loss, f)
