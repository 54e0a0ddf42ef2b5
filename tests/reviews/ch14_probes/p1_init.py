# Probe 1: logit scale at initialisation: tied+rescaled, untied (mtlib's "T5 v1.1"), tied-no-rescale,
# HF random init with tie_word_embeddings=False, and a fan-in-scaled untied head (T5X / Mesh TF).
import math, torch, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
from mtlib.models.t5 import T5
from mtlib import utils
v = tp.vocab()
batch = tp.task_stream(tp.TASKS, 96, 0)(0)
def report(name, m):
    m.eval()
    with torch.no_grad():
        logits = m(batch.input_ids, batch.decoder_input_ids, batch.attention_mask)
        loss = tp.loss_fn(m, batch).item()
        p = logits.softmax(-1).max(-1).values
    print(f"{name:<38} logit std {logits.std():6.2f}  loss {loss:6.2f}  mean max-prob {p.mean():.2f}")
for seed in (0, 1):
    utils.seed_everything(seed); tied = T5(tp.model_config())
    utils.seed_everything(seed); untied = T5(tp.model_config(tie_word_embeddings=False))
    utils.seed_everything(seed); broken = T5(tp.model_config(tie_word_embeddings=False)); broken.lm_head.weight = broken.shared.weight
    utils.seed_everything(seed); fanin = T5(tp.model_config(tie_word_embeddings=False))
    with torch.no_grad(): fanin.lm_head.weight.normal_(0, 64 ** -0.5)
    print("seed", seed, "ln V =", round(math.log(v.size), 2))
    for n, m in (("tied + rescale (T5)", tied), ("untied, mtlib init (T5 v1.1)", untied),
                 ("tied, no rescale (cell 43)", broken), ("untied, fan-in init (T5X)", fanin)):
        report(n, m)
# Hugging Face random init with tie_word_embeddings=False
import transformers
cfg = transformers.T5Config(vocab_size=v.size, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                            num_heads=4, dropout_rate=0.0, tie_word_embeddings=False, decoder_start_token_id=0)
torch.manual_seed(0)
hf = transformers.T5ForConditionalGeneration(cfg).eval()
print("HF: scale_decoder_outputs", cfg.scale_decoder_outputs, "tie_word_embeddings", cfg.tie_word_embeddings,
      "lm_head is shared:", hf.lm_head.weight is hf.shared.weight, "lm_head std", round(hf.lm_head.weight.std().item(), 3))
with torch.no_grad():
    out = hf(input_ids=batch.input_ids, attention_mask=batch.attention_mask, decoder_input_ids=batch.decoder_input_ids).logits
    print(f"HF untied random init: logit std {out.std():.2f}, loss {F.cross_entropy(out.reshape(-1, v.size), batch.labels.reshape(-1), ignore_index=0):.2f}")
