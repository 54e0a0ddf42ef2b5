# Probe 8b: fp16 overflow of the residual stream: HF T5 clamps (finfo.max - 1000), mtlib does not.
import torch, warnings
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
import transformers
from mtlib.models.t5 import T5
cfg = transformers.T5Config(vocab_size=99, d_model=40, d_kv=12, d_ff=56, num_layers=3, num_decoder_layers=2, num_heads=3,
                            dropout_rate=0.0, decoder_start_token_id=0)
ids = torch.randint(2, 99, (2, 9), generator=torch.Generator().manual_seed(1)); dec = ids[:, :5]
for scale in (3e4, 1e5):
    torch.manual_seed(0)
    hf = transformers.T5ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for blk in hf.encoder.block:
            blk.layer[1].DenseReluDense.wo.weight.mul_(scale)
    ours = T5.from_hf(hf).eval()
    with torch.no_grad():
        r32 = hf(input_ids=ids, decoder_input_ids=dec).logits
        res = hf.encoder(input_ids=ids, output_hidden_states=True).hidden_states[-2].abs().max()
        r16 = hf.half()(input_ids=ids, decoder_input_ids=dec).logits
        m16 = ours.half()(ids, dec)
        b16 = T5.from_hf(hf.float()).to(torch.bfloat16).eval()(ids, dec)
    print(f"scale {scale:g}: fp32 residual max {res:.3g}; fp16 logits finite: HF {bool(torch.isfinite(r16).all())}, "
          f"mtlib {bool(torch.isfinite(m16).all())} ({int(torch.isnan(m16).sum())} NaN); "
          f"HF fp16 argmax = fp32 argmax {(r16.argmax(-1) == r32.argmax(-1)).float().mean():.2f}; "
          f"mtlib bf16 finite {bool(torch.isfinite(b16).all())}, argmax agreement {(b16.float().argmax(-1) == r32.argmax(-1)).float().mean():.2f}")
