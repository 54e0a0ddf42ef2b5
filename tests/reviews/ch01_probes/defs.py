"""Chapter 1's definitions, copied from chapters/01_attention_intuition.ipynb (cells 7, 12, 26, 28, 30)."""
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
from mtlib.attention import AdditiveAttention
from mtlib.data import PAD, decode_symbols, sequence_task
device = torch.device("cpu")

def truth(x):
    return 2 * torch.sin(x) + x**0.8

def nadaraya_watson(x_query, x_train, y_train, bandwidth):
    distance = x_query[:, None] - x_train[None, :]
    scores = -(distance**2) / (2 * bandwidth**2)
    weights = scores.softmax(dim=-1)
    return weights @ y_train, weights

def leave_one_out_loss(log_sigma, x_train, y_train):
    n = len(x_train)
    may_attend = ~torch.eye(n, dtype=torch.bool)
    distance = x_train[:, None] - x_train[None, :]
    scores = -(distance**2) / (2 * log_sigma.exp() ** 2)
    weights = scores.masked_fill(~may_attend, float("-inf")).softmax(dim=-1)
    return F.mse_loss(weights @ y_train, y_train)

def learn_bandwidth(x_train, y_train, steps=300, start=0.0, lr=0.05):
    log_sigma = torch.tensor(start, requires_grad=True)
    opt = torch.optim.Adam([log_sigma], lr=lr)
    for _ in range(steps):
        loss = leave_one_out_loss(log_sigma, x_train, y_train)
        opt.zero_grad(); loss.backward(); opt.step()
    return log_sigma.exp().item()

class Seq2Seq(nn.Module):
    def __init__(self, vocab_size, use_attention, d_emb=32, d_hidden=64, bidirectional=True):
        super().__init__()
        self.use_attention = use_attention
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD)
        self.encoder = nn.GRU(d_emb, d_hidden, batch_first=True, bidirectional=bidirectional)
        d_enc = 2 * d_hidden if bidirectional else d_hidden
        self.bridge = nn.Linear(d_enc, d_hidden)
        self.decoder = nn.GRU(d_emb, d_hidden, batch_first=True)
        d_out = d_hidden
        self.attention = None
        if use_attention:
            self.attention = AdditiveAttention(d_hidden, d_enc, d_hidden)
            d_out += d_enc
        self.out = nn.Linear(d_out, vocab_size)

    def encode(self, src, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, last = self.encoder(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        s0 = torch.tanh(self.bridge(torch.cat(list(last), dim=-1)))
        mask = (src != PAD)[:, None, :]
        return states, s0[None], mask

    def decode(self, tgt_in, states, s, mask):
        dec, s = self.decoder(self.embed(tgt_in), s)
        weights = None
        if self.use_attention:
            context, weights = self.attention(dec, states, states, mask=mask)
            dec = torch.cat([dec, context], dim=-1)
        return self.out(dec), s, weights

    def forward(self, src, lengths, tgt_in):
        states, s0, mask = self.encode(src, lengths)
        logits, _, weights = self.decode(tgt_in, states, s0, mask)
        return logits, weights

    @torch.no_grad()
    def greedy(self, src, lengths, steps, bos):
        states, s, mask = self.encode(src, lengths)
        token = torch.full((src.shape[0], 1), bos, device=src.device)
        outputs, maps = [], []
        for _ in range(steps):
            logits, s, weights = self.decode(token, states, s, mask)
            token = logits.argmax(-1)
            outputs.append(token); maps.append(weights)
        maps = torch.cat(maps, 1) if self.use_attention else None
        return torch.cat(outputs, 1), maps

VOCAB, MAX_LEN, STEPS = 13, 20, 600

def train(model, kind="reverse", steps=STEPS, batch_size=64, lr=3e-3, seed=0):
    data = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        length = int(torch.randint(1, MAX_LEN + 1, (1,), generator=data))
        batch = sequence_task(batch_size, length, length, kind=kind, generator=data)
        src, tgt = batch.src.to(device), batch.tgt.to(device)
        logits, _ = model(src, batch.lengths, tgt[:, :-1])
        targets = tgt[:, 1:].reshape(-1)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets, ignore_index=PAD)
        opt.zero_grad(); loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); losses.append(loss.item())
    return losses

def build(name, seed=0, **kw):
    torch.manual_seed(seed)
    if name == "without attention":
        return Seq2Seq(VOCAB, use_attention=False, **kw).to(device)
    if name == "no attention, d=72":
        return Seq2Seq(VOCAB, use_attention=False, d_hidden=72, **kw).to(device)
    model = Seq2Seq(VOCAB, use_attention=True, **kw).to(device)
    if name == "uniform (trained)":
        model.attention.score_proj.weight.data.zero_()
        model.attention.score_proj.weight.requires_grad_(False)
    return model

LENGTHS = [4, 8, 12, 16, 20]

def eval_batch(model, length, n=500, seed=123, kind="reverse"):
    model.eval()
    held_out = torch.Generator().manual_seed(seed + length)
    batch = sequence_task(n, length, length, kind=kind, generator=held_out)
    bos = batch.tgt[0, 0].item()
    predicted, maps = model.greedy(batch.src, batch.lengths, length, bos)
    model.train()
    correct = predicted == batch.tgt[:, 1:length + 1]
    return batch, predicted, maps, correct
