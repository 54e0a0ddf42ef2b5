import torch, copy
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.transformer import Transformer, TransformerConfig, greedy_decode, beam_search
from mtlib.data import BOS, EOS, PAD, encode_numbers
m, rep = tr.load_checkpoint()
h = tr.heldout_sample()

print("== (a) static cross-attention cache reused with a new source")
a = encode_numbers(torch.tensor([123456, 654321])); b = encode_numbers(torch.tensor([987654, 111111]))
with torch.no_grad():
    cache = m.new_cache()
    mem_a, mem_b = m.encode(a.src), m.encode(b.src)
    bos = torch.full((2,1), BOS)
    la = m.decode(bos, mem_a, memory_mask=m.src_mask(a.src), cache=cache)
    # hand-written loop that forgets to reset the cache between sources:
    for c in cache: c.self_attn.reset()
    lb_reused = m.decode(bos, mem_b, memory_mask=m.src_mask(b.src), cache=cache)
    lb_fresh = m.decode(bos, mem_b, memory_mask=m.src_mask(b.src), cache=m.new_cache())
print("  max |logits(reused static cache) - logits(fresh)| =", (lb_reused - lb_fresh).abs().max().item(),
      "; same as source a's:", torch.allclose(lb_reused, la), "; no error raised")
c5 = encode_numbers(torch.tensor([12345, 54321]))  # other source length S=5
try:
    with torch.no_grad():
        for c in cache: c.self_attn.reset()
        m.decode(bos, m.encode(c5.src), memory_mask=m.src_mask(c5.src), cache=cache)
    print("  other source length: no error")
except Exception as e:
    print("  other source length raises", type(e).__name__, str(e)[:150])

print("== (b) beam search: how many rows does the cross-attention K projection project?")
calls = []
hk = m.decoder.layers[0].cross_attn.k_proj.register_forward_hook(lambda mod, i, o: calls.append(tuple(i[0].shape)))
beam_search(m, h.src[:4], bos_id=BOS, eos_id=EOS, max_len=11, beam_size=4)
hk.remove()
print("  calls", calls, "(4 sources, 4 beams)")

print("== (c) greedy_decode in training mode with dropout (the base config's 0.1)")
torch.manual_seed(0)
cfg = tr.model_config(dropout=0.1)
md = Transformer(cfg); md.load_state_dict(m.state_dict()); md.train()
outs = [greedy_decode(md, h.src[:200], bos_id=BOS, eos_id=EOS, max_len=11) for _ in range(2)]
same = all(o.shape == outs[0].shape for o in outs) and torch.equal(outs[0], outs[1])
print("  two calls identical:", same, "; model.training after:", md.training, "; no warning")
md.eval(); print("  eval-mode exact:", tr.evaluate(md, encode_numbers(h.numbers[:200]))["exact"])
md.train(); r = tr.score(torch.nn.functional.pad(outs[0], (0, 11-outs[0].shape[1]), value=PAD), encode_numbers(h.numbers[:200]))
print("  train-mode greedy_decode exact (dropout on):", round(r["exact"],3))

print("== (d) half precision on CPU: cached vs recomputed greedy, accuracy")
sub = encode_numbers(h.numbers[:400])
for dt in (torch.bfloat16, torch.float16):
    try:
        mh = copy.deepcopy(m).to(dt)
        g1 = greedy_decode(mh, sub.src, bos_id=BOS, eos_id=EOS, max_len=11, use_cache=True)
        g2 = greedy_decode(mh, sub.src, bos_id=BOS, eos_id=EOS, max_len=11, use_cache=False)
        with torch.no_grad():
            tin, lab = tr.shift_right(sub.tgt)
            lf = m(sub.src, tin).float(); lh = mh(sub.src, tin).float()
        print(f"  {dt}: cached==recomputed {torch.equal(g1,g2)}, exact {tr.evaluate(mh, sub)['exact']:.4f}, "
              f"max|logit - fp32| {(lf-lh).abs().max().item():.3g}")
    except Exception as e:
        print(f"  {dt}: raises {type(e).__name__}: {str(e)[:200]}")

print("== (e) parity with nn.Transformer, padding on both sides, Tq != Tk, train and eval mode")
torch.manual_seed(1)
ref = torch.nn.Transformer(d_model=24, nhead=3, num_encoder_layers=2, num_decoder_layers=2,
                           dim_feedforward=40, dropout=0.0, batch_first=True)
ours = Transformer.from_torch(ref, src_vocab=11, tgt_vocab=13)
src = torch.tensor([[3,4,5,6,7],[3,4,0,0,0],[5,6,7,0,0]]); tgt = torch.tensor([[1,3,4,5],[1,6,0,0],[1,7,8,0]])
for mode in ("train", "eval"):
    ref.train(mode == "train"); ours.train(mode == "train")
    with torch.no_grad():
        xs = ours._embed(ours.src_embed, src); xt = ours._embed(ours.tgt_embed, tgt)
        T = tgt.shape[1]
        out_ref = ref(xs, xt, tgt_mask=ref.generate_square_subsequent_mask(T, dtype=torch.bool),
                      src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0,
                      tgt_is_causal=True)
        out_ours = ours.decoder(xt, ours.encoder(xs, mask=ours.src_mask(src)), self_mask=ours.tgt_mask(tgt), memory_mask=ours.src_mask(src))
        real = tgt != 0
        mem_ref = ref.encoder(xs, src_key_padding_mask=src == 0); mem_ours = ours.encoder(xs, mask=ours.src_mask(src))
    print(f"  {mode}: decoder max diff at real target positions {(out_ref - out_ours)[real].abs().max().item():.2e}; "
          f"encoder memory diff at real {(mem_ref-mem_ours)[src!=0].abs().max().item():.2e}, at pads {(mem_ref-mem_ours)[src==0].abs().max().item():.2e}")

print("== (f) tr.shift_right vs the exercise's shift_right")
t = torch.tensor([[BOS, 5, 6, EOS, PAD]])
print("  tr.shift_right(tgt) ->", [x.tolist() for x in tr.shift_right(t)], "(drops a column: shape T-1)")

print("== (g) src longer than any training number / than max_len")
def read(model, digits):
    from mtlib.data.translation import SRC_TOKENS
    from mtlib.data import decode_words
    src = torch.tensor([[SRC_TOKENS.index(c) for c in digits]])
    return decode_words(greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=11)[0])
for d in ("1234567", "9"*16):
    try: print(f"  {d} ->", repr(read(m, d)))
    except Exception as e: print(f"  {d} raises", type(e).__name__, str(e)[:120])
try: print("  17 digits ->", read(m, "1"*17))
except Exception as e: print("  17 digits raises", type(e).__name__, str(e)[:160])
