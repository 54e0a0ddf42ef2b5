# Probe 9: exercise 5 says "BART has the same forward and generate": with BARTConfig.tiny's default special ids
# the book's data plumbing (pad 0, </s> 1, decoder start 0) silently disagrees with BART (pad 1, </s> 2, start 2).
import torch, warnings
warnings.filterwarnings("ignore"); torch.set_num_threads(1)
from mtlib.experiments import t5_pretrain as tp
from mtlib.models.bart import BART, BARTConfig
v = tp.vocab()
cfg = BARTConfig.tiny(vocab_size=v.size)
print("BARTConfig.tiny ids: pad", cfg.pad_token_id, f"({v.itos[cfg.pad_token_id]!r} in the book's vocab), eos", cfg.eos_token_id,
      f"({v.itos[cfg.eos_token_id]!r}), decoder start", cfg.decoder_start_token_id, "; max positions", cfg.max_position_embeddings)
torch.manual_seed(0)
bart = BART(cfg)
print("embedding row of the book's </s> is zero (it is BART's padding_idx):", bool((bart.shared.weight[1] == 0).all()))
batch = tp.heldout_task_batch("reverse", 4)
out = bart.eval().generate(batch.input_ids, 5, attention_mask=batch.attention_mask)
print("first decoder token of BART.generate:", out[:, 0].tolist(), "but tp.make_batch trains decoders to start from", batch.decoder_input_ids[:, 0].tolist())
h = tp.train_run(bart.train(), tp.task_stream(tp.TASKS, 96, 0), tp.multitask_settings(), seed=0, steps=2)
print("tp.train_run accepts it silently: losses", [round(x, 2) for x in h.loss])
