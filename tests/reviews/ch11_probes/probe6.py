import time, torch
torch.set_num_threads(1)
from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
from mtlib.positional import sinusoidal_table
data = digits_split()
_, report = dg.load_checkpoint()
pe1 = sinusoidal_table(4, 32)  # (4, 32) float64
rows, cols = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
table = torch.zeros(17, 64)
table[1:] = torch.cat([pe1[rows.flatten()], pe1[cols.flatten()]], dim=1).float()  # class token row: zeros
print("row norm of the 2-D sincos table", round(table[1:].norm(dim=-1).mean().item(), 2),
      "; learned pos_embed row norm (trained seed 0)", round(torch.tensor(report['runs']['vit/0']['pos_embed'])[1:].norm(dim=-1).mean().item(), 2))
sub = data.subset(100, seed=0)
t0 = time.process_time()
m = dg.make_model("vit", seed=0, pos_embed=table, freeze_pos=True)
h = dg.train_classifier(m, sub, seed=0)
print(f"ViT, fixed 2-D sincos, 100 images, seed 0: test {h.last_eval()['test_accuracy']:.3f} "
      f"(learned positions, script: {report['sizes']['vit/100/0']:.3f}; CNN {report['sizes']['cnn/100/0']:.3f}); cpu {time.process_time()-t0:.0f}s")
