"""Definitions copied from chapters/07_transformer_block.ipynb (cells 1, 9, 12, 27, 33) for probes."""
import math, time
from dataclasses import replace
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib import train, utils
from mtlib.blocks import BlockConfig, EncoderBlock, FeedForward
from mtlib.positional import LearnedEncoding

VOCAB, SEQ_LEN, WIDTH = 12, 10, 32
UNIFORM_LOSS = math.log(VOCAB)
STEPS, WARMUP, DEPTH, LR = 60, 20, 6, 2e-2

class Tagger(nn.Module):
    def __init__(self, depth, norm_first, block=EncoderBlock, final_norm=None):
        super().__init__()
        config = BlockConfig(d_model=WIDTH, num_heads=4, d_ff=2 * WIDTH, dropout=0.0, norm_first=norm_first)
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = LearnedEncoding(WIDTH, SEQ_LEN)
        self.blocks = nn.ModuleList(block(config) for _ in range(depth))
        for b in self.blocks:
            b.self_attn.fused = False
        fn = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(WIDTH) if fn else nn.Identity()
        self.out = nn.Linear(WIDTH, VOCAB)
    def forward(self, tokens):
        h = self.pos(self.embed(tokens))
        for b in self.blocks:
            h = b(h)
        return self.out(self.norm(h))

def reverse_batches(seed, batch=32):
    def make(step):
        g = torch.Generator().manual_seed(10_000 * seed + step)
        tokens = torch.randint(VOCAB, (batch, SEQ_LEN), generator=g)
        return tokens, tokens.flip(1)
    return make

def tagging_loss(model, batch):
    tokens, targets = batch
    return train.sequence_loss(model(tokens), targets)

def run(norm_first, lr, warmup, seed, block=EncoderBlock, depth=DEPTH, steps=STEPS, model_out=None, optimizer_fn=None, **kw):
    torch.manual_seed(seed)
    model = Tagger(depth, norm_first, block, **kw)
    opt = None if optimizer_fn is None else optimizer_fn(model)
    h = train.fit(model, tagging_loss, reverse_batches(seed), steps=steps, lr=lr,
                  schedule=train.warmup_cosine(warmup, steps), seed=seed, optimizer=opt)
    if model_out is not None:
        model_out.append(model)
    return h

def final_loss(history):
    return sum(history.loss[-10:]) / 10

def accuracy(model, n=2000, seed=999):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(VOCAB, (n, SEQ_LEN), generator=g)
    with torch.no_grad():
        pred = model(tokens).argmax(-1)
    ok = pred == tokens.flip(1)
    return ok.float().mean().item(), ok.all(1).float().mean().item(), ok.float().mean(0)

class NoResidualBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        parts = EncoderBlock(config)
        self.self_attn, self.ff, self.norm1, self.norm2 = (parts.self_attn, parts.ff, parts.norm1, parts.norm2)
    def forward(self, x):
        x = self.self_attn(self.norm1(x))[0]
        return self.ff(self.norm2(x))
