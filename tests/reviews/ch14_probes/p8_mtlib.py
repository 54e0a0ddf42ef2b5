# Probe 8: mtlib T5 pieces against Hugging Face: bucket function, fp16 overflow (HF clamps), masks of other
# ranks/dtypes, right-padding invariance, and the sentinel hint case left over from probe 7.
import torch, warnings
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
import transformers
from transformers.models.t5.modeling_t5 import T5Attention
from mtlib.models.t5 import T5
from mtlib.positional import RelativePositionBias
# (a) buckets
rel = torch.arange(-300, 301)
bad = 0
for bidir in (True, False):
    for nb, md in ((32, 128), (8, 20), (16, 50), (64, 512)):
        ours = RelativePositionBias.bucket(rel, bidirectional=bidir, num_buckets=nb, max_distance=md)
        theirs = T5Attention._relative_position_bucket(rel, bidirectional=bidir, num_buckets=nb, max_distance=md)
        bad += int((ours != theirs).sum())
print("bucket mismatches vs HF over 601 offsets x 8 settings:", bad)
# (b) fp16: a random HF T5 whose feed-forward output is scaled so the residual stream passes 65504
cfg = transformers.T5Config(vocab_size=99, d_model=40, d_kv=12, d_ff=56, num_layers=3, num_decoder_layers=2, num_heads=3,
                            dropout_rate=0.0, decoder_start_token_id=0)
torch.manual_seed(0)
hf = transformers.T5ForConditionalGeneration(cfg).eval()
with torch.no_grad():
    for blk in hf.encoder.block:
        blk.layer[1].DenseReluDense.wo.weight.mul_(3000.0)
ours = T5.from_hf(hf).eval()
ids = torch.randint(2, 99, (2, 9)); dec = torch.randint(2, 99, (2, 5))
with torch.no_grad():
    r32 = hf(input_ids=ids, decoder_input_ids=dec).logits
    m32 = ours(ids, dec)
    print("float32: max |ours - HF| =", f"{(r32 - m32).abs().max():.2e}", "; encoder residual max |x| =",
          f"{hf.encoder(input_ids=ids, output_hidden_states=True).hidden_states[-2].abs().max():.3g}")
    hf16, ours16 = hf.half(), ours.half()
    r16 = hf16(input_ids=ids, decoder_input_ids=dec).logits
    m16 = ours16(ids, dec)
    print(f"float16: HF finite {bool(torch.isfinite(r16).all())}, mtlib finite {bool(torch.isfinite(m16).all())}; "
          f"mtlib non-finite logits {int((~torch.isfinite(m16)).sum())} of {m16.numel()}")
    if torch.isfinite(r16).all():
        print("  HF fp16 vs HF fp32 argmax agreement:", f"{(r16.argmax(-1) == r32.argmax(-1)).float().mean():.2f}")
# (c) masks: HF-style (B, T) long works; what about bool, float, 4-D?
torch.manual_seed(0)
hf = transformers.T5ForConditionalGeneration(cfg).eval(); ours = T5.from_hf(hf).eval()
am = torch.ones(2, 9, dtype=torch.long); am[1, 6:] = 0
with torch.no_grad():
    ref = hf(input_ids=ids, attention_mask=am, decoder_input_ids=dec).logits
    for name, mask in (("long (B,T)", am), ("bool (B,T)", am.bool()), ("float (B,T)", am.float()), ("4-D bool (B,1,1,T)", am.bool()[:, None, None])):
        try:
            out = ours(ids, dec, mask)
            print(f"mask {name:<20}: max |ours - HF| {(out - ref).abs().max():.1e}")
        except Exception as e:
            print(f"mask {name:<20}: {type(e).__name__}: {str(e)[:140]}")
    # right padding invariance: row 1 with its 3 pad positions vs row 1 alone, unpadded
    alone = ours(ids[1:, :6], dec[1:])
    print(f"padded row vs the same row unpadded: max diff {(ours(ids, dec, am)[1] - alone[0]).abs().max():.1e}")
# (d) the sentinel-after-span mistake (probe 7's broken lambda)
from mtlib import exercises
def after(tokens, noise, s):
    ins, outs, k, i, T = [], [], 0, 0, len(tokens)
    while i < T:
        if noise[i]:
            j = i
            while j < T and noise[j]: j += 1
            ins.append(s[k]); outs += [*tokens[i:j].tolist(), s[k]]; k += 1; i = j
        else:
            ins.append(int(tokens[i])); i += 1
    return ins, outs
try:
    exercises.check_sentinel_spans(after)
except AssertionError as e:
    print("sentinel after its span:", str(e).split("\n")[-1])
