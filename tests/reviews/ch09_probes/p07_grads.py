from common import *
from mtlib.models import mask_tokens
mlm, vocab, report = bm.load_checkpoint()
train_text, _ = bm.corpus()
windows = bm.mlm_windows(vocab.encode(train_text), vocab)
g = torch.Generator().manual_seed(5)
rows = windows[torch.randint(len(windows), (32,), generator=g)]
batch = mask_tokens(rows, mask_id=vocab.mask, vocab_size=vocab.size, special_ids=vocab.special_ids, generator=g)
mlm.train()
loss = bm._mlm_loss(vocab, .15)(mlm, batch); loss.backward()
for n, p in mlm.named_parameters():
    if any(k in n for k in ("tok_embed", "pos_embed", "seg_embed", "blocks.0.self_attn.q_proj.weight", "blocks.3.ff.linear2.weight")):
        print(f"{n:<36} grad rms {p.grad.pow(2).mean().sqrt().item():.2e}  weight rms {p.pow(2).mean().sqrt().item():.3f}")
# share of the embedding-LN input variance that is positional, checkpoint
with torch.no_grad():
    e = mlm.bert.tok_embed(rows); pe = mlm.bert.pos_embed(torch.arange(32))[None]
    print("variance share of position in tok+pos (checkpoint):", round((pe.var() / (e + pe).var()).item(), 3))
