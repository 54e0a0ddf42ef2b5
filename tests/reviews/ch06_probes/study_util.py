"""Helpers of the chapter-6 review probes: a copy of ``extrapolation.train`` with an init hook."""

import torch
from torch import nn

from mtlib.experiments import extrapolation as ex


def train(scheme, seed, config, init=None):
    """A copy of ex.train with an optional re-initialisation hook (init(model)) after construction."""
    torch.manual_seed(seed)
    model = ex.PositionModel(scheme, config)
    if init is not None:
        init(model)
    data = torch.Generator().manual_seed(1000 + seed)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    model.train()
    for _step in range(config.steps):
        tokens, targets = ex.make_batch(config.batch_size, config.train_len, config, data)
        loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@torch.no_grad()
def detail(model, config, window=None):
    """Per-position accuracy on evaluate()'s longest test set, and whole-sequence metrics."""
    data = torch.Generator().manual_seed(0)
    for length in config.test_lengths():
        tokens, targets = ex.make_batch(config.test_size, length, config, data)
    correct = model(tokens, window=window).argmax(-1) == targets  # (n, 64)
    s, L = config.shift, config.train_len
    per_pos = correct.float().mean(0)  # (64,)
    return {
        "per_pos": per_pos,
        "seen_tok": correct[:, s:L].float().mean().item(),
        "unseen_tok": correct[:, L:].float().mean().item(),
        "seen_seq": correct[:, s:L].all(-1).float().mean().item(),  # whole sequence 0..31 right
        "unseen_seq": correct[:, L:].all(-1).float().mean().item(),  # every unseen position right
        "p32_47": correct[:, L : L + 16].float().mean().item(),
        "p48_63": correct[:, L + 16 :].float().mean().item(),
    }
