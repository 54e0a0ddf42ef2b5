import torch, time, sys
torch.set_num_threads(1)
from mtlib.experiments import translation as tr
from mtlib.data import encode_numbers, PAD
DEBUG = tr.debug_settings()
test = encode_numbers(tr.heldout_numbers(max_digits=3))
def run(kind, seed, **cfg):
    base = dict(d_model=32, num_encoder_layers=1, num_decoder_layers=1, d_ff=64); base.update(cfg)
    t = time.process_time()
    m, h = tr.train_model(DEBUG, seed=seed, kind=kind, config=tr.model_config(**base))
    r = tr.evaluate(m, test)
    print(f"{kind:>16} seed {seed} {cfg}: early {sum(h.loss[25:50])/25:.3f} final {sum(h.loss[-25:])/25:.3f} "
          f"exact {r['exact']:.3f} token {r['token']:.3f}  ({time.process_time()-t:.1f} s cpu)", flush=True)
    return m, h, r
which = sys.argv[1]
if which == "pad":
    for s in (1, 2): run("no_padding_mask", s)
    m,_,_ = run("none", 0)  # reference
if which == "pooled":
    run("pooled", 0); run("pooled", 1)
if which == "dk":
    for s in (0, 1):
        run("none", s, num_heads=1); run("no_scaling", s, num_heads=1)
