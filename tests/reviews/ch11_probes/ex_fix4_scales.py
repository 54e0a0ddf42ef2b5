"""Fix 4 (exercises): row norms of a 2-D sinusoidal table vs the learned pos_embed and the patch
tokens (seed-0 checkpoint), and the blank value F.pad should use. CPU, a few seconds."""
import torch

from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
from mtlib.positional import sinusoidal_table
from tests.solutions.ch11 import rollout_by_layer

torch.set_num_threads(1)
data = digits_split()
models, report = dg.load_checkpoint()
vit = models["vit"]
half = sinusoidal_table(4, 32)  # (4, 32): rows or columns of the 4 x 4 grid
table = torch.cat([half.repeat_interleave(4, 0), half.repeat(4, 1)], dim=1)  # (16, 64): row, column
print("2-D table row norm", table.norm(dim=-1).unique().tolist())
pos = vit.pos_embed.detach()[0]
print("learned pos_embed row norms: mean %.3f (min %.3f, max %.3f)" % (pos.norm(dim=-1).mean(), pos.norm(dim=-1).min(), pos.norm(dim=-1).max()))
with torch.no_grad():
    tok = vit.patch_embed(data.x_test)  # (B, N, d)
    print("patch tokens row norm: mean %.3f" % tok.norm(dim=-1).mean())
    fresh = dg.make_model("vit", seed=0).patch_embed(data.x_test)
    print("untrained patch tokens row norm: mean %.3f" % fresh.norm(dim=-1).mean())
    print("background value", data.background)
    _, att = vit.forward_features(data.x_test[:50], return_attentions=True)
    rows = rollout_by_layer(att)  # (50, 3, 17)
    from mtlib.models import attention_rollout
    assert torch.allclose(rows[:, -1], attention_rollout(att)[:, 0], atol=1e-6)
    print("class token's own share after layers 1..3:", rows[:, :, 0].mean(0).tolist())
