"""Load the chapter's own definitions (cells 29 and 31) without running their experiments."""
import json, sys
sys.path.insert(0, '/work/main')
import torch
torch.set_num_threads(1)
import torch.nn.functional as F
from torch import nn
from mtlib.attention import MultiHeadAttention, scaled_dot_product_attention
device = torch.device("cpu")
_nb = json.load(open('/work/main/chapters/12_efficient_attention.ipynb'))
_src = {c.get('id'): ''.join(c['source']) for c in _nb['cells']}
_lin = _src['4be0c127'].split('# The two forms agree')[0]
_lag = _src['bfc90813'].split('accuracy = {name')[0]
ns = dict(torch=torch, F=F, nn=nn, MultiHeadAttention=MultiHeadAttention, device=device,
          scaled_dot_product_attention=scaled_dot_product_attention)
exec(_lin, ns)
exec(_lag, ns)
