"""Numbers to English words with an encoder-decoder Transformer (chapter 8).

The task is :mod:`mtlib.data.translation`: ``"40519"`` -> ``"forty thousand five hundred
nineteen"``, with a held-out split of numbers that training never sees. This module holds what
chapter 8 trains and measures, so that the notebook shows the experiments and not the plumbing:

- :func:`model_config`, :class:`TrainSettings`: the chapter's model (the paper's Post-LN
  Transformer at d_model 64, 2+2 layers) and how it is trained (teacher forcing with shifted
  targets, label smoothing 0.1, warm-up + cosine decay, gradient clipping, all through
  :func:`mtlib.train.fit`);
- :func:`train_model`, :func:`evaluate`: training and held-out exact/token accuracy, greedy or
  beam;
- :class:`PooledMemoryTransformer`: the control, a decoder that sees the source only as one
  vector (the mean of the encoder output), so cross-attention has nothing to choose from;
- the classic bugs, each injected without editing :mod:`mtlib` (:data:`BUGS`,
  :func:`make_buggy`, :func:`buggy_loss`);
- a checkpoint (:data:`CHECKPOINT`) written by this script and loaded by the chapter and a test.

Run ``python -m mtlib.experiments.translation`` to train the checkpoint's model (seed 0) and the
other seeds and the control, evaluate them all on the whole held-out split (also by number of
digits), and rewrite the checkpoint with that report (about 10 minutes on one CPU thread).
``--controls-only`` retrains only the controls (a few minutes), checks them against the stored
report, and adds their whole-split results, keeping the stored model.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mtlib import train, utils
from mtlib.attention import MultiHeadAttention
from mtlib.data.synthetic import BOS, EOS, PAD
from mtlib.data.translation import (
    MAX_TGT_LEN,
    NumberBatch,
    encode_numbers,
    is_heldout,
    number_batch,
)
from mtlib.transformer import Transformer, TransformerConfig, beam_search, greedy_decode

__all__ = [
    "BUGS",
    "CHECKPOINT",
    "PooledMemoryTransformer",
    "TrainSettings",
    "buggy_loss",
    "by_length",
    "debug_settings",
    "decode",
    "evaluate",
    "heldout_numbers",
    "heldout_sample",
    "load_checkpoint",
    "make_buggy",
    "model_config",
    "save_checkpoint",
    "score",
    "remove_scaling",
    "shift_right",
    "train_model",
    "training_inputs",
]

#: Where the chapter's checkpoint lives (inside the package, so that it installs with mtlib).
CHECKPOINT = Path(str(resources.files("mtlib.experiments"))) / "translation_checkpoint.pt"
SRC_VOCAB, TGT_VOCAB = 13, 33  # PAD BOS EOS + 10 digits; PAD BOS EOS + 30 words
HELDOUT_SEED = 2017  # the fixed held-out sample the chapter and the checkpoint report use


def model_config(**overrides: Any) -> TransformerConfig:
    """The chapter's model: the paper's Post-LN Transformer, shrunk (about 173k parameters).

    d_model 64, 4 heads, 2 encoder + 2 decoder blocks, d_ff 128, no dropout (the data is
    unlimited), sinusoidal positions, padding id 0.
    """
    base = TransformerConfig.tiny(src_vocab=SRC_VOCAB, tgt_vocab=TGT_VOCAB, d_model=64,
                                  num_heads=4, d_ff=128, max_len=16)  # fmt: skip
    return TransformerConfig(**{**asdict(base), **overrides})


@dataclass
class TrainSettings:
    """How a model is trained: batches of fresh training numbers, AdamW, warm-up + cosine."""

    steps: int = 600  # optimizer steps
    batch_size: int = 128  # numbers per batch, drawn fresh at every step
    lr: float = 2e-3  # peak learning rate
    warmup: int = 60  # linear warm-up steps, then cosine decay to 0 at `steps`
    label_smoothing: float = 0.1  # Szegedy et al. (2016); the paper uses 0.1
    clip_norm: float = 1.0  # global gradient-norm clipping
    max_digits: int = 6  # numbers up to 999,999


def debug_settings(**overrides: Any) -> TrainSettings:
    """The debugging runs' budget: numbers below 1000, 250 steps of 128 (a few seconds each)."""
    small = TrainSettings(steps=250, batch_size=128, lr=5e-3, warmup=25, max_digits=3)
    return TrainSettings(**{**asdict(small), **overrides})


def shift_right(tgt: Tensor) -> tuple[Tensor, Tensor]:
    """Teacher forcing: the decoder reads ``BOS y1 .. yn`` and must predict ``y1 .. yn EOS``.

    Args:
        tgt: (B, T) targets ``BOS y EOS`` right-padded with PAD.

    Returns:
        ``(decoder_input, labels)``, each (B, T - 1): the targets without their last column,
        and without their first.
    """
    return tgt[:, :-1], tgt[:, 1:]


def teacher_forcing_loss(model: nn.Module, batch: NumberBatch, *, label_smoothing: float) -> Tensor:
    """Cross-entropy of the next target token at every position, pads ignored."""
    decoder_input, labels = shift_right(batch.tgt)  # (B, T-1) each
    logits = model(batch.src, decoder_input)  # (B, T-1, V)
    return train.sequence_loss(logits, labels, pad_id=PAD, label_smoothing=label_smoothing)


def batch_stream(settings: TrainSettings, seed: int) -> Callable[[int], NumberBatch]:
    """``step -> batch`` of training numbers, deterministic given ``seed`` and ``step``."""

    def batches(step: int) -> NumberBatch:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
        return number_batch(settings.batch_size, max_digits=settings.max_digits, generator=generator)

    return batches


def heldout_sample(n: int = 2000, *, max_digits: int = 6, seed: int = HELDOUT_SEED) -> NumberBatch:
    """A fixed sample of held-out numbers (lengths 3..max_digits uniformly, as in training)."""
    generator = utils.fixed_generator(seed)  # the same sample under the seed sweep too
    return number_batch(n, split="heldout", max_digits=max_digits, generator=generator)


def heldout_numbers(max_digits: int = 6) -> Tensor:
    """Every held-out number below ``10 ** max_digits`` (about 100,000 for 6 digits), sorted."""
    numbers = torch.arange(10**max_digits)
    return numbers[is_heldout(numbers)]


# --------------------------------------------------------------------------------------------
# Decoding and accuracy
# --------------------------------------------------------------------------------------------


def decode(
    model: Transformer,
    src: Tensor,
    *,
    method: str = "greedy",
    beam_size: int = 4,
    length_penalty: float = 0.6,
    chunk: int = 1000,
) -> Tensor:
    """Generate targets for ``src`` (B, S) in chunks: (B, MAX_TGT_LEN), PAD after the first EOS."""
    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    was_training = model.training
    model.eval()
    out = torch.full((src.shape[0], MAX_TGT_LEN), PAD, dtype=torch.long)
    for start in range(0, src.shape[0], chunk):
        part = src[start : start + chunk]
        if method == "greedy":
            ys = greedy_decode(model, part, bos_id=BOS, eos_id=EOS, max_len=MAX_TGT_LEN)
        else:
            ys = beam_search(model, part, bos_id=BOS, eos_id=EOS, max_len=MAX_TGT_LEN,
                             beam_size=beam_size, length_penalty=length_penalty)  # fmt: skip
        out[start : start + chunk, : ys.shape[1]] = ys.cpu()
    model.train(was_training)
    is_eos = (out == EOS).long()
    after_eos = (is_eos.cumsum(dim=1) - is_eos) > 0  # (B, L) positions after the first EOS
    return out.masked_fill(after_eos, PAD)  # a model without pad_id fills them with EOS


def score(predicted: Tensor, batch: NumberBatch) -> dict[str, float]:
    """Exact-sequence and token accuracy of predictions (B, MAX_TGT_LEN) against ``batch.tgt``.

    ``exact``: the whole output equals the reference (every word, EOS, nothing after it).
    ``token``: share of the reference's tokens after BOS (words and EOS) that the prediction
    has at the same position; one missing word shifts every later one, so it counts them all
    wrong.
    """
    reference = torch.full_like(predicted, PAD)
    reference[:, : batch.tgt.shape[1]] = batch.tgt
    exact = (predicted == reference).all(dim=1)  # (B,)
    real = reference[:, 1:] != PAD  # (B, L-1) words and EOS
    hits = (predicted[:, 1:] == reference[:, 1:]) & real
    return {"exact": exact.float().mean().item(), "token": (hits.sum() / real.sum()).item()}


def evaluate(
    model: Transformer, batch: NumberBatch, *, method: str = "greedy", beam_size: int = 4
) -> dict[str, float]:
    """Held-out accuracy of ``model`` on ``batch``: ``{"exact": .., "token": ..}``."""
    return score(decode(model, batch.src, method=method, beam_size=beam_size), batch)


# --------------------------------------------------------------------------------------------
# The control: cross-attention with nothing to choose from
# --------------------------------------------------------------------------------------------


class PooledMemoryTransformer(Transformer):
    """The same model, but the decoder sees the source only as the mean of the encoder output.

    Cross-attention then has one key: its output is a fixed vector per source, the
    recurrent encoder-decoder's bottleneck of chapter 1. Same parameters, same training.
    """

    def decode(self, tgt: Tensor, memory: Tensor, *, memory_mask: Tensor | None = None,
               **kwargs: Any) -> Tensor:  # fmt: skip
        """Decode against the masked mean of ``memory`` (B, 1, d_model) instead of ``memory``."""
        if memory_mask is None:
            pooled = memory.mean(dim=1, keepdim=True)  # (B, 1, d)
        else:
            weights = memory_mask.reshape(memory.shape[0], -1, 1).to(memory.dtype)  # (B, S, 1)
            pooled = (memory * weights).sum(1, keepdim=True) / weights.sum(1, keepdim=True)
        return super().decode(tgt, pooled, memory_mask=None, **kwargs)


# --------------------------------------------------------------------------------------------
# The classic bugs, injected without editing mtlib
# --------------------------------------------------------------------------------------------

#: Each bug, with what it changes.
BUGS: dict[str, str] = {
    "none": "the correct model",
    "no_scaling": "scores q.k without the 1/sqrt(d_k) factor",
    "no_positions": "no positional encoding in encoder or decoder",
    "leaky_mask": "decoder self-attention sees the whole target (the causal mask leaks)",
    "unshifted": "decoder input = the labels themselves (targets not shifted)",
    "no_padding_mask": "pad tokens are attended to like real tokens",
    "offset_zero": "step-by-step decoding puts every new token at position 0",
}


class _Scale:
    """A forward hook that multiplies a module's output by ``factor``."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, module: nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> Tensor:
        return output * self.factor


class _NoPositions(nn.Module):
    """Stands in for the positional encoding and adds nothing."""

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        return x


class _OffsetZeroTransformer(Transformer):
    """Decoding with a cache that puts every new token at position 0 (forgets the offset)."""

    def decode(self, tgt: Tensor, memory: Tensor, **kwargs: Any) -> Tensor:
        kwargs["offset"] = 0
        return super().decode(tgt, memory, **kwargs)


def remove_scaling(module: nn.Module) -> nn.Module:
    """Inject the missing-1/sqrt(d_k) bug into every attention layer of ``module`` (in place).

    A forward hook multiplies each query projection's output by sqrt(head_dim), so the layer
    computes ``q.k`` instead of ``q.k / sqrt(d_k)``; parameters and state dict are unchanged.
    """
    for layer in module.modules():
        if isinstance(layer, MultiHeadAttention):
            layer.q_proj.register_forward_hook(_Scale(math.sqrt(layer.head_dim)))
    return module


def make_buggy(bug: str, config: TransformerConfig) -> Transformer:
    """A fresh model with ``bug`` built in (the loss-side bugs are in :func:`buggy_loss`)."""
    if bug not in BUGS:
        raise ValueError(f"bug must be one of {sorted(BUGS)}, got {bug!r}")
    if bug == "no_padding_mask":
        config = TransformerConfig(**{**asdict(config), "pad_id": None})
    model = _OffsetZeroTransformer(config) if bug == "offset_zero" else Transformer(config)
    if bug == "no_scaling":
        remove_scaling(model)
    if bug == "no_positions":
        model.positional = _NoPositions()  # type: ignore[assignment]
    return model


def training_inputs(bug: str, batch: NumberBatch) -> tuple[Tensor, Tensor, Tensor | None]:
    """What the training loss feeds the decoder: ``(decoder_input, labels, tgt_mask)``.

    Correct: ``shift_right(batch.tgt)`` and the default mask (None: causal + padding). With
    ``"unshifted"`` the decoder reads the labels themselves; with ``"leaky_mask"`` the mask is
    all True (T, T).
    """
    decoder_input, labels = shift_right(batch.tgt)  # (B, T-1) each
    if bug == "unshifted":
        decoder_input = labels  # the token to predict is the one the decoder reads
    tgt_mask = None
    if bug == "leaky_mask":
        tgt_mask = torch.ones(labels.shape[1], labels.shape[1], dtype=torch.bool)  # (T, T)
    return decoder_input, labels, tgt_mask


def buggy_loss(bug: str, *, label_smoothing: float) -> Callable[[nn.Module, NumberBatch], Tensor]:
    """The training loss with ``bug`` (the correct one for bugs that live in the model)."""

    def loss(model: nn.Module, batch: NumberBatch) -> Tensor:
        decoder_input, labels, tgt_mask = training_inputs(bug, batch)
        logits = model(batch.src, decoder_input, tgt_mask=tgt_mask)  # (B, T-1, V)
        return train.sequence_loss(logits, labels, pad_id=PAD, label_smoothing=label_smoothing)

    return loss


# --------------------------------------------------------------------------------------------
# Training and the checkpoint
# --------------------------------------------------------------------------------------------


def train_model(
    settings: TrainSettings,
    *,
    seed: int,
    config: TransformerConfig | None = None,
    kind: str = "none",
    eval_batch: NumberBatch | None = None,
    eval_every: int = 100,
    steps: int | None = None,
    batches: Callable[[int], NumberBatch] | None = None,
) -> tuple[Transformer, train.History]:
    """Train a fresh model with :func:`mtlib.train.fit`.

    Args:
        settings: the training budget and optimiser settings.
        seed: seeds the initial weights and the training batches.
        config: model sizes; default :func:`model_config`.
        kind: ``"pooled"`` for the control, or a key of :data:`BUGS` (``"none"``: correct).
        eval_batch: held-out batch for greedy exact/token accuracy every ``eval_every`` steps.
        eval_every: steps between evaluations.
        steps: stop after this many steps (the schedule still spans ``settings.steps``).
        batches: ``step -> NumberBatch`` to train on; default ``batch_stream(settings, seed)`` (fresh
            training numbers, deterministic given ``seed``).

    Returns:
        The trained model (in eval mode) and its :class:`~mtlib.train.History`.
    """
    config = model_config() if config is None else config
    torch.manual_seed(seed)
    if kind == "pooled":
        model: Transformer = PooledMemoryTransformer(config)
    else:
        model = make_buggy(kind, config)
    eval_fn = None if eval_batch is None else (lambda m: evaluate(m, eval_batch))
    history = train.fit(
        model,
        buggy_loss(kind, label_smoothing=settings.label_smoothing),
        batch_stream(settings, seed) if batches is None else batches,
        steps=settings.steps if steps is None else steps,
        lr=settings.lr,
        schedule=train.warmup_cosine(settings.warmup, settings.steps),
        clip_norm=settings.clip_norm,
        eval_fn=eval_fn,
        eval_every=eval_every,
        seed=seed,
    )
    return model.eval(), history


def save_checkpoint(model: Transformer, path: Path, report: dict[str, Any]) -> None:
    """Save the config, the weights and the script's report (accuracies, curve) to ``path``."""
    state = {"config": asdict(model.config), "model": model.state_dict(), "report": report}
    torch.save(state, path)


def load_checkpoint(path: Path | None = None) -> tuple[Transformer, dict[str, Any]]:
    """Load the chapter's checkpoint into the current code: ``(model in eval mode, report)``."""
    state = torch.load(CHECKPOINT if path is None else path, map_location="cpu", weights_only=True)
    model = Transformer(TransformerConfig(**state["config"]))
    model.load_state_dict(state["model"])
    return model.eval(), state["report"]


def _summary(values: list[float]) -> str:
    return f"{min(values):.4f} to {max(values):.4f}"


def by_length(numbers: Tensor, wrong: Tensor) -> dict[int, dict[str, int]]:
    """Errors by number of digits: ``{digits: {"n": how many numbers, "wrong": how many wrong}}``.

    Args:
        numbers: (N,) distinct numbers (the whole held-out split).
        wrong: (N,) bool, True where the output is not exactly the reference.
    """
    digits = numbers.clamp(min=1).log10().floor().long() + 1  # (N,) 1..7
    return {int(d): {"n": int((digits == d).sum()), "wrong": int(wrong[digits == d].sum())}
            for d in digits.unique()}  # fmt: skip


def _controls_only(args: argparse.Namespace, settings: TrainSettings, sample: NumberBatch,
                   everything: Tensor, full: NumberBatch) -> None:  # fmt: skip
    """Retrain only the controls and store them with their whole-split and by-length results.

    The stored model and the Transformer runs are kept; their by-length tables come from their
    stored error lists (complete when under 50). A retrained control may differ from the stored
    one in the last digits when the CPU kernels differ (another machine): it must agree within
    0.01 of exact accuracy on the sample, the tolerance of the reproduction test.
    """
    model, report = load_checkpoint(args.out)
    runs = report["runs"]
    for seed in args.seeds:
        errors = runs[f"none/{seed}"]["errors"]
        n_wrong = round((1 - runs[f"none/{seed}"]["all_heldout"]["exact"]) * len(everything))
        assert len(errors) == n_wrong < 50, "the stored error list is complete"
        wrong = torch.isin(everything, torch.tensor(errors, dtype=torch.long))
        runs[f"none/{seed}"]["by_length"] = by_length(everything, wrong)
        start = time.time()
        pooled, _ = train_model(settings, seed=seed, kind="pooled")
        result: dict[str, Any] = {
            "greedy": evaluate(pooled, sample),
            "beam": evaluate(pooled, sample, method="beam"),
            "seconds": round(time.time() - start, 1),
        }
        before = runs[f"pooled/{seed}"]["greedy"]["exact"]
        assert abs(result["greedy"]["exact"] - before) <= 0.01, (seed, result, before)
        predicted = decode(pooled, full.src)
        result["all_heldout"] = score(predicted, full)
        wrong = ~(predicted[:, : full.tgt.shape[1]] == full.tgt).all(dim=1)
        result["by_length"] = by_length(everything, wrong)
        runs[f"pooled/{seed}"] = result
        print("pooled", seed, f"(stored exact {before:.4f})", result)
    report["controls_retrained"] = True
    save_checkpoint(model, args.out, report)
    print(f"rewrote the report of {args.out} (weights unchanged)")


def main(argv: list[str] | None = None) -> None:
    """Train the chapter's models and write the checkpoint with its report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    parser.add_argument("--controls-only", action="store_true",
                        help="retrain only the controls (checked against the stored report) and add "
                        "their whole-split and by-length results; the stored model is kept")  # fmt: skip
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the numbers the chapter reproduces were made on one thread
    settings, sample, everything = TrainSettings(), heldout_sample(), heldout_numbers()
    full = encode_numbers(everything)
    if args.controls_only:
        _controls_only(args, settings, sample, everything, full)
        return
    runs: dict[str, dict[str, Any]] = {}
    saved: Transformer | None = None
    for kind in ("none", "pooled"):
        for seed in args.seeds:
            start = time.time()
            model, history = train_model(settings, seed=seed, kind=kind, eval_batch=sample)
            result: dict[str, Any] = {
                "greedy": evaluate(model, sample),
                "beam": evaluate(model, sample, method="beam"),
                "seconds": round(time.time() - start, 1),
            }
            predicted = decode(model, full.src)
            result["all_heldout"] = score(predicted, full)
            wrong = ~(predicted[:, : full.tgt.shape[1]] == full.tgt).all(dim=1)
            result["by_length"] = by_length(everything, wrong)  # distinct numbers, whole split
            if kind == "none":
                result["errors"] = everything[wrong][:50].tolist()
                result["loss"] = history.loss
                result["evals"] = history.evals
                if seed == args.seeds[0]:
                    saved = model
            runs[f"{kind}/{seed}"] = result
            print(kind, seed, {k: v for k, v in result.items() if k not in ("loss", "evals")})
    assert saved is not None
    report = {
        "seed": args.seeds[0],
        "settings": asdict(settings),
        "heldout_sample": {"n": len(sample.numbers), "seed": HELDOUT_SEED},
        "all_heldout_n": len(everything),
        "runs": runs,
    }
    save_checkpoint(saved, args.out, report)
    reloaded, _ = load_checkpoint(args.out)  # what the chapter will see
    assert evaluate(reloaded, sample) == runs[f"none/{args.seeds[0]}"]["greedy"]
    for kind in ("none", "pooled"):
        exact = [runs[f"{kind}/{s}"]["greedy"]["exact"] for s in args.seeds]
        print(f"{kind}: held-out exact accuracy (greedy), seeds {args.seeds}: {_summary(exact)}")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
