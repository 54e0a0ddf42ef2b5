import torch
torch.set_num_threads(1)
from mtlib.experiments import char_lm
model, _, _ = char_lm.load_checkpoint()
tok, _, _ = char_lm.splits()
a = tok.encode("The return statement")[None]
padded = torch.cat([torch.full((1, 6), tok.ids[" "]), a], 1)  # left-padded with spaces to batch with a longer prompt
print("alone      :", repr(tok.decode(model.generate(a, 30)[0, a.shape[1]:])))
print("left-padded:", repr(tok.decode(model.generate(padded, 30)[0, padded.shape[1]:])))
import inspect
print("generate accepts attention_mask/pad:", "attention_mask" in inspect.signature(model.generate).parameters)
