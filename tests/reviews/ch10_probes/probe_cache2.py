import torch
torch.set_num_threads(1)
from mtlib.experiments import char_lm
model, _, _ = char_lm.load_checkpoint()
tok, tr, va = char_lm.splits()
prompt = tok.encode("A class ")[None]; rest = "object attribute which items"
for dt in (torch.float32, torch.bfloat16):
    m = model.to(dt)
    with torch.no_grad():
        full = m(torch.cat([prompt, tok.encode(rest)[None]], 1)).float()
        cache = m.new_cache(); first = m(prompt, cache=cache)[:, -1:]
        inc = torch.cat([first] + [m(tok.encode(c)[None], cache=cache)[:, -1:] for c in rest], 1).float()
    print(dt, "max |cached - full| logits", f"{(inc - full[:, 7:]).abs().max().item():.1e}")
