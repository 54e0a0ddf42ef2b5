import torch, math, runpy, time
torch.set_num_threads(1)
from mtlib.experiments import char_lm
ns = runpy.run_path("/usr/lib/python3.11/pydoc_data/topics.py")
topics = ns["topics"]
text = "\n".join(topics[k] for k in sorted(topics))
model, maskless, report = char_lm.load_checkpoint()
tok_ref, tr_ref, va_ref = char_lm.splits()
tok = char_lm.CharTokenizer(text)
assert tok.chars == tok_ref.chars
ids = tok.encode(text); cut = int(len(ids)*0.9)
tr, va = ids[:cut], ids[cut:]
print("report val", round(report["runs"]["causal/0"]["val"],4), "bigram", round(report["bigram"],4))
print("3.11.7 val", round(char_lm.evaluate(model, va_ref),4))
v = char_lm.evaluate(model, va)
print("3.11.2 corpus: val", round(v,4), "diff", round(v - report["runs"]["causal/0"]["val"],4))
print("3.11.2 bigram", round(char_lm.bigram_loss(tr, va, tok.vocab_size),4), "unigram", round(char_lm.unigram_loss(tr, va, tok.vocab_size),4))
# overlap: how much of 3.11.2's val text is in 3.11.7's train text?
t0=time.time()
