import math, torch
torch.set_num_threads(1)
from mtlib import exercises
def r_matrix(x, p):  # block-diagonal rotation matrices, row vectors: x @ R^T
    d = x.shape[-1]; th = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    out = []
    for t, m in enumerate(p.tolist()):
        R = torch.block_diag(*[torch.tensor([[math.cos(m * a), -math.sin(m * a)], [math.sin(m * a), math.cos(m * a)]], dtype=torch.float64) for a in th.tolist()])
        out.append(x[..., t, :].double() @ R.T)
    return torch.stack(out, -2).float()
exercises.check_rope_rotation(r_matrix)
