"""Reversing digit strings with a GRU encoder-decoder, with and without attention (chapter 1).

This module holds what chapter 1 trains and measures, so that the notebook shows the model and
the experiments and a script trains them over seeds:

- :class:`Seq2Seq`: a bidirectional-GRU encoder, a GRU decoder and, behind one switch, additive
  (Bahdanau) attention from :class:`mtlib.attention.AdditiveAttention`;
- :func:`build`, :func:`train`: the chapter's four models (:data:`NAMES`: without attention,
  with attention, the capacity control ``d_hidden=72`` and the *trained* uniform-attention
  control) and their training (teacher forcing, one length per batch, Adam);
- :func:`accuracy_by_length`, :func:`position_accuracy`, :func:`edit_score`: held-out greedy
  accuracy per token, per whole sequence, per output position and under edit distance;
- :func:`attention_study`, :func:`error_kinds`, :func:`error_stats`: where the trained attention
  looks (the mirror position) and what kinds of errors it makes;
- :func:`ablate`: the test-time ablation (scores set to zero in a copy);
- a checkpoint (:data:`CHECKPOINT`): the seed-0 attention model and the report of every run.

Run ``python -m mtlib.experiments.reversal`` to train the four models on seeds 0-9 for
:data:`STEPS` steps (evaluated after 600 steps as well), measure every run, and rewrite the
checkpoint (40 runs of one to two CPU-minutes each on one thread; ``--jobs 2`` runs two at a
time, ``--work DIR`` keeps finished runs so that an interrupted run resumes). The stored
checkpoint was made under the book's pinned CPU numerics (``tests/numerics.py``:
``eval "$(python -m tests.numerics --export)"`` first), the same numerics the chapter is executed
under, so the chapter's live re-run of the first steps retraces the stored curve.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import resources as _resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib.attention import AdditiveAttention
from mtlib.data import PAD, sequence_task

__all__ = [
    "CHECKPOINT",
    "LENGTHS",
    "LONG_LENGTHS",
    "MAX_LEN",
    "NAMES",
    "SEEDS",
    "STEPS",
    "VOCAB",
    "Seq2Seq",
    "ablate",
    "accuracy_by_length",
    "attention_study",
    "build",
    "edit_distance",
    "edit_score",
    "error_kind",
    "error_kinds",
    "error_stats",
    "load_checkpoint",
    "measure",
    "position_accuracy",
    "train",
]

#: The checkpoint this script writes and the chapter loads (package data: it installs with mtlib).
CHECKPOINT = Path(str(_resources.files("mtlib.experiments"))) / "reversal_checkpoint.pt"
VOCAB = 13  # 3 special tokens (PAD, <s>, </s>) + 10 digits
MAX_LEN = 20  # training lengths are 1..20
STEPS = 1200  # Adam steps of 64 sequences each (the chapter's budget)
EARLY = 600  # every run is also measured here (the chapter's earlier budget)
LENGTHS = (4, 8, 12, 16, 20)  # held-out lengths, all within the training range
LONG_LENGTHS = (24, 28, 32)  # beyond the training range
SEEDS = tuple(range(10))  # each seed sets the initial weights and the training data
NAMES = ("without attention", "with attention", "no attention, d=72", "uniform (trained)")
STUDY_LENGTH, STUDY_SEED = 16, 321  # the held-out sources of the attention study


class Seq2Seq(nn.Module):
    """A GRU encoder-decoder; ``use_attention`` switches additive attention on.

    Args:
        vocab_size: number of token ids (PAD = 0).
        use_attention: give the output layer the attention context ``c_t`` besides ``s_t``.
        d_emb: embedding width.
        d_hidden: state width of each GRU direction and of the decoder.
        bidirectional: a bidirectional encoder (False: left to right only, for exercise 4).
    """

    def __init__(self, vocab_size: int, use_attention: bool, d_emb: int = 32, d_hidden: int = 64,
                 bidirectional: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.use_attention = use_attention
        self.embed = nn.Embedding(vocab_size, d_emb, padding_idx=PAD)
        self.encoder = nn.GRU(d_emb, d_hidden, batch_first=True, bidirectional=bidirectional)
        d_enc = 2 * d_hidden if bidirectional else d_hidden  # width of each encoder state h_j
        self.bridge = nn.Linear(d_enc, d_hidden)  # last encoder states -> s_0
        self.decoder = nn.GRU(d_emb, d_hidden, batch_first=True)
        d_out = d_hidden
        self.attention = None
        if use_attention:
            self.attention = AdditiveAttention(d_hidden, d_enc, d_hidden)
            d_out += d_enc  # the output layer also sees the context
        self.out = nn.Linear(d_out, vocab_size)

    def encode(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, Tk) sources -> encoder states (B, Tk, d_enc), s_0 (1, B, d_hidden), mask (B, 1, Tk)."""
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False
        )  # each direction starts and stops at the source's true ends, never in the padding
        states, last = self.encoder(packed)  # last: (directions, B, d_hidden)
        states, _ = nn.utils.rnn.pad_packed_sequence(
            states, batch_first=True, total_length=src.shape[1]
        )  # (B, Tk, d_enc)
        s0 = torch.tanh(self.bridge(torch.cat(list(last), dim=-1)))  # (B, d_hidden)
        mask = (src != PAD)[:, None, :]  # (B, 1, Tk), True = may attend
        return states, s0[None], mask  # s0 as (1, B, d_hidden), the shape nn.GRU expects

    def decode(self, tgt_in: Tensor, states: Tensor, s: Tensor,
               mask: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:  # fmt: skip
        """(B, Tq) decoder inputs -> logits (B, Tq, vocab), last state, weights (B, Tq, Tk) or None."""
        dec, s = self.decoder(self.embed(tgt_in), s)  # (B, Tq, d_hidden)
        weights = None
        if self.use_attention:
            context, weights = self.attention(dec, states, states, mask=mask)
            dec = torch.cat([dec, context], dim=-1)  # (B, Tq, d_hidden + d_enc)
        return self.out(dec), s, weights  # logits (B, Tq, vocab)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: the logits for every position of ``tgt_in`` (B, Tq) at once."""
        states, s0, mask = self.encode(src, lengths)
        logits, _, weights = self.decode(tgt_in, states, s0, mask)
        return logits, weights

    @torch.no_grad()
    def greedy(self, src: Tensor, lengths: Tensor, steps: int,
               bos: int) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """Feed the model its own predictions for ``steps`` steps: tokens (B, steps), weights."""
        states, s, mask = self.encode(src, lengths)
        token = torch.full((src.shape[0], 1), bos, device=src.device)
        outputs, maps = [], []
        for _ in range(steps):
            logits, s, weights = self.decode(token, states, s, mask)  # s: the GRU state so far
            token = logits.argmax(-1)  # (B, 1)
            outputs.append(token)
            maps.append(weights)
        maps = torch.cat(maps, 1) if self.use_attention else None  # (B, steps, Tk)
        return torch.cat(outputs, 1), maps


def build(name: str, seed: int = 0, device: str | torch.device = "cpu") -> Seq2Seq:
    """A fresh model of :data:`NAMES`; ``seed`` sets the initial weights."""
    if name not in NAMES:
        raise ValueError(f"name must be one of {NAMES}, got {name!r}")
    torch.manual_seed(seed)  # same initial weights for the shared parts
    if name == "without attention":
        return Seq2Seq(VOCAB, use_attention=False).to(device)
    if name == "no attention, d=72":
        return Seq2Seq(VOCAB, use_attention=False, d_hidden=72).to(device)
    model = Seq2Seq(VOCAB, use_attention=True).to(device)
    if name == "uniform (trained)":  # w = 0 and frozen: alpha_tj = 1/n, always
        model.attention.score_proj.weight.data.zero_()
        model.attention.score_proj.weight.requires_grad_(False)
    return model


def train(model: Seq2Seq, kind: str = "reverse", steps: int = STEPS, batch_size: int = 64,
          lr: float = 3e-3, seed: int = 0, callback: Any = None) -> list[float]:  # fmt: skip
    """Teacher-forced training on fresh batches, one length (1..MAX_LEN) per batch; the losses.

    ``seed`` sets the training data; ``callback(step, model)``, if given, runs after each step.
    """
    device = next(model.parameters()).device
    data = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)  # frozen parameters get no gradient
    losses = []
    for step in range(1, steps + 1):
        length = int(torch.randint(1, MAX_LEN + 1, (1,), generator=data))  # one length per batch
        batch = sequence_task(batch_size, length, length, kind=kind, generator=data)
        src, tgt = batch.src.to(device), batch.tgt.to(device)
        logits, _ = model(src, batch.lengths, tgt[:, :-1])  # teacher forcing
        targets = tgt[:, 1:].reshape(-1)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets, ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if callback is not None:
            callback(step, model)
    return losses


def _held_out(length: int, kind: str = "reverse", n: int = 500, seed: int = 123) -> Any:
    """The held-out sources of one length: the same every time (a seed training never uses)."""
    return sequence_task(n, length, length, kind=kind, generator=torch.Generator().manual_seed(seed + length))


def _greedy(model: Seq2Seq, batch: Any, steps: int) -> tuple[Tensor, Tensor | None]:
    """Greedy decoding of ``batch`` in eval mode; tokens and weights on the CPU."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    bos = batch.tgt[0, 0].item()
    predicted, weights = model.greedy(batch.src.to(device), batch.lengths, steps, bos)
    model.train(was_training)
    return predicted.cpu(), None if weights is None else weights.cpu()


def accuracy_by_length(model: Seq2Seq, kind: str = "reverse", lengths: Any = LENGTHS,
                       n: int = 500, seed: int = 123) -> dict[str, dict[int, float]]:  # fmt: skip
    """Held-out greedy accuracy: ``{"token": {length: acc}, "sequence": {length: acc}}``.

    For each length, ``n`` fresh sources; the decoder runs exactly ``length`` steps (it is
    given the length). *token*: share of output digits right at their position; *sequence*:
    share of sources with every digit right.
    """
    result: dict[str, dict[int, float]] = {"token": {}, "sequence": {}}
    for length in lengths:
        batch = _held_out(length, kind, n, seed)
        predicted, _ = _greedy(model, batch, length)
        correct = predicted == batch.tgt[:, 1 : length + 1]  # (n, length)
        result["token"][length] = correct.float().mean().item()
        result["sequence"][length] = correct.all(dim=1).float().mean().item()
    return result


def position_accuracy(model: Seq2Seq, length: int = MAX_LEN, kind: str = "reverse") -> list[float]:
    """Held-out token accuracy at each output step 1..length (the sources of accuracy_by_length)."""
    batch = _held_out(length, kind)
    predicted, _ = _greedy(model, batch, length)
    return (predicted == batch.tgt[:, 1 : length + 1]).float().mean(dim=0).tolist()


def edit_distance(a: list[int], b: list[int]) -> int:
    """Levenshtein distance: the fewest insertions, deletions and replacements from a to b."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (x != y))
    return row[-1]


def edit_score(predicted: Tensor, target: Tensor) -> Tensor:
    """Per sequence, 1 - edit distance / length: one missing digit costs about 2 / length."""
    length = target.shape[1]
    distances = [edit_distance(p, t) for p, t in zip(predicted.tolist(), target.tolist(), strict=True)]
    return 1 - torch.tensor(distances, dtype=torch.float) / length


def error_kind(p: Tensor, t: Tensor) -> str:
    """What follows the first wrong step of a prediction ``p`` against its target ``t`` (T,)."""
    k = (p != t).nonzero()[0].item()  # the first wrong step
    if torch.equal(p[k + 1 :], t[k + 1 :]):
        return "one digit replaced"
    if torch.equal(p[k + 1 :], t[k:-1]):
        return "one digit inserted"
    if torch.equal(p[k:-1], t[k + 1 :]):
        return "one digit dropped"
    return "other"


def error_kinds(predicted: Tensor, target: Tensor) -> dict[str, list[int]]:
    """The wrong sequences (row indices), grouped by :func:`error_kind`."""
    kinds: dict[str, list[int]] = {}
    for i in (predicted != target).any(dim=1).nonzero().flatten().tolist():
        kinds.setdefault(error_kind(predicted[i], target[i]), []).append(i)
    return kinds


def _first_error(p: Tensor, t: Tensor) -> int:
    return int((p != t).nonzero()[0].item())


def in_run(t: Tensor, k: int) -> bool:
    """Whether target digit ``k`` has an equal neighbour (it sits in a run like 3 7 7 1)."""
    return bool((k > 0 and t[k] == t[k - 1]) or (k + 1 < len(t) and t[k] == t[k + 1]))


def error_stats(predicted: Tensor, target: Tensor) -> dict[str, Any]:
    """Counts and scores per error kind, and where the single shifts happen.

    Returns a dict: ``n``, ``n_wrong``, per kind its ``count``, mean ``token`` score and mean
    ``edit`` score (:func:`edit_score`); ``dropped_in_run``: dropped digits with an equal
    neighbour; ``inserted_repeat``: inserted digits that repeat the digit before (a stutter).
    """
    per_token = (predicted == target).float().mean(dim=1)  # (n,)
    edit = edit_score(predicted, target)  # (n,)
    kinds = error_kinds(predicted, target)
    stats: dict[str, Any] = {"n": len(target), "n_wrong": sum(len(v) for v in kinds.values()), "kinds": {}}
    for kind, rows in kinds.items():
        stats["kinds"][kind] = {"count": len(rows), "token": per_token[rows].mean().item(),
                                "edit": edit[rows].mean().item(),
                                "edit_min": edit[rows].min().item()}  # fmt: skip
    dropped, inserted = kinds.get("one digit dropped", []), kinds.get("one digit inserted", [])
    stats["dropped_in_run"] = sum(in_run(target[i], _first_error(predicted[i], target[i])) for i in dropped)
    stats["inserted_repeat"] = sum(
        bool(k > 0 and predicted[i][k] == target[i][k - 1])
        for i in inserted
        for k in [_first_error(predicted[i], target[i])]
    )
    return stats


@torch.no_grad()
def attention_study(model: Seq2Seq, n: int = 500) -> dict[str, Any]:
    """Where the trained attention looks, on ``n`` held-out sources of length 16.

    Returns the batch, the greedy predictions (n, 16) and weights (n, 16, 16), the mirror
    weight per output step, the shares of the weight on the mirror, on its two neighbours and
    elsewhere, and the cosine similarity of neighbouring encoder states h_j, h_(j+1) when their
    digits are equal and when they differ.
    """
    length = STUDY_LENGTH
    batch = sequence_task(n, length, length, kind="reverse", generator=torch.Generator().manual_seed(STUDY_SEED))
    predicted, weights = _greedy(model, batch, length)
    steps, mirrors = torch.arange(length), torch.arange(length - 1, -1, -1)
    mirror = weights[:, steps, mirrors]  # (n, 16): alpha_{t, n+1-t}
    beside = torch.zeros_like(mirror)
    for offset in (-1, 1):  # the two source positions next to the mirror
        j = mirrors + offset
        inside = (j >= 0) & (j < length)
        beside[:, inside] += weights[:, steps[inside], j[inside]]
    device = next(model.parameters()).device
    states, _, _ = model.encode(batch.src.to(device), batch.lengths)  # (n, 16, d_enc)
    states = states.cpu()
    cosine = F.cosine_similarity(states[:, :-1], states[:, 1:], dim=-1)  # (n, 15)
    equal = batch.src[:, :-1] == batch.src[:, 1:]  # (n, 15) neighbouring digits equal
    return {
        "batch": batch,
        "predicted": predicted,
        "weights": weights,
        "mirror_by_step": mirror.mean(dim=0).tolist(),
        "mirror": mirror.mean().item(),
        "beside": beside.mean().item(),
        "elsewhere": 1 - mirror.mean().item() - beside.mean().item(),
        "cosine_equal": cosine[equal].mean().item(),
        "cosine_different": cosine[~equal].mean().item(),
    }


def ablate(model: Seq2Seq) -> Seq2Seq:
    """A copy of a trained attention model with w = 0: every score 0, every weight 1/n."""
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        ablated.attention.score_proj.weight.zero_()  # e_tj = 0 for all j  ->  alpha_tj = 1/n
    return ablated


def _eos_sequence_accuracy(model: Seq2Seq, length: int = MAX_LEN) -> float:
    """Share of held-out sources with every digit right *and* </s> right after the last one."""
    batch = _held_out(length)
    predicted, _ = _greedy(model, batch, length + 1)
    return (predicted == batch.tgt[:, 1 : length + 2]).all(dim=1).float().mean().item()


def measure(model: Seq2Seq, name: str) -> dict[str, Any]:
    """Everything the chapter reports about one trained model (all held-out, greedy)."""
    result: dict[str, Any] = {
        "accuracy": accuracy_by_length(model),
        "long": accuracy_by_length(model, lengths=LONG_LENGTHS),
        "by_position": position_accuracy(model),
        "sequence_with_eos": _eos_sequence_accuracy(model),
    }
    batch = _held_out(MAX_LEN)
    predicted, _ = _greedy(model, batch, MAX_LEN)
    result["edit"] = edit_score(predicted, batch.tgt[:, 1 : MAX_LEN + 1]).mean().item()
    if name == "uniform (trained)":
        result["w_zero"] = not model.attention.score_proj.weight.any().item()
    if name == "with attention":
        study = attention_study(model)
        target = study["batch"].tgt[:, 1 : STUDY_LENGTH + 1]
        result["study"] = {k: v for k, v in study.items() if k not in ("batch", "predicted", "weights")}
        result["errors"] = error_stats(study["predicted"], target)
        result["ablated"] = accuracy_by_length(ablate(model))
    return result


# --------------------------------------------------------------------------------------------
# The script: every model on every seed, and the checkpoint
# --------------------------------------------------------------------------------------------


def _run(job: tuple[str, int, int, str]) -> dict[str, Any]:
    """Train one (model, seed) for ``steps``, measuring it after :data:`EARLY` steps too."""
    name, seed, steps, work = job
    out = Path(work) / f"{name.replace(' ', '_').replace(',', '').replace('=', '')}_{seed}.pt"
    if out.exists():
        return torch.load(out, weights_only=False)
    torch.set_num_threads(1)  # the numbers the chapter reproduces were made on one thread
    start, cpu = time.time(), resource.getrusage(resource.RUSAGE_SELF)
    model = build(name, seed)
    early: dict[str, Any] = {}

    def at_early(step: int, m: Seq2Seq) -> None:
        if step == EARLY:
            early["accuracy"] = accuracy_by_length(m)

    losses = train(model, steps=steps, seed=seed, callback=at_early)
    result = measure(model, name)
    now = resource.getrusage(resource.RUSAGE_SELF)
    result.update(name=name, seed=seed, steps=steps, early=early,
                  loss=torch.tensor(losses, dtype=torch.float32),
                  parameters=sum(p.numel() for p in model.parameters()),
                  seconds=round(time.time() - start, 1),
                  cpu_seconds=round(now.ru_utime + now.ru_stime - cpu.ru_utime - cpu.ru_stime, 1))  # fmt: skip
    if name == "with attention":
        result["state_dict"] = model.state_dict()
    torch.save(result, out)
    token = result["accuracy"]["token"][MAX_LEN]
    print(f"{name:<19} seed {seed}: token {token:.2f} at length {MAX_LEN}, {result['seconds']:.0f} s", flush=True)
    return result


def load_checkpoint(path: Path | None = None) -> tuple[Seq2Seq, dict[str, Any]]:
    """The stored seed-0 attention model (eval mode) and the report of every run."""
    state = torch.load(CHECKPOINT if path is None else path, map_location="cpu", weights_only=True)
    model = Seq2Seq(VOCAB, use_attention=True)
    model.load_state_dict(state["model"])
    return model.eval(), state["report"]


def main(argv: list[str] | None = None) -> None:
    """Train every model of :data:`NAMES` on every seed and write the checkpoint."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each on one thread)")
    parser.add_argument("--work", type=Path, default=Path("_build/reversal_runs"),
                        help="finished runs are kept here, so that a stopped script resumes")  # fmt: skip
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as in every run, so that the check below sees the same numbers
    args.work.mkdir(parents=True, exist_ok=True)
    jobs = [(name, seed, args.steps, str(args.work)) for name in NAMES for seed in args.seeds]
    jobs.sort(key=lambda j: (j[0] != "with attention", j[1]))  # the attention model first
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(_run, jobs))
    runs: dict[str, dict[str, Any]] = {}
    saved = None
    for r in results:
        if r["name"] == "with attention" and r["seed"] == args.seeds[0]:
            saved = r["state_dict"]
        runs[f"{r['name']}/{r['seed']}"] = {k: v for k, v in r.items() if k != "state_dict"}
    assert saved is not None
    report = {"seeds": list(args.seeds), "steps": args.steps, "early_steps": EARLY,
              "lengths": list(LENGTHS), "long_lengths": list(LONG_LENGTHS), "runs": runs}  # fmt: skip
    torch.save({"model": saved, "report": report}, args.out)
    model, again = load_checkpoint(args.out)  # what the chapter will see
    assert accuracy_by_length(model) == again["runs"][f"with attention/{args.seeds[0]}"]["accuracy"]
    for name in NAMES:
        token = [runs[f"{name}/{s}"]["accuracy"]["token"][MAX_LEN] for s in args.seeds]
        print(f"{name:<19} token accuracy at {MAX_LEN}, seeds {args.seeds}: {min(token):.2f} to {max(token):.2f}")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")
    print(json.dumps({"cpu_seconds": sum(r["cpu_seconds"] for r in results)}))


if __name__ == "__main__":
    main()
