"""A character-level GPT on Python's own documentation (chapter 10).

The corpus is ``pydoc_data.topics`` (the text of ``help()``'s topics; Python 3.11.7's copy, which
:mod:`mtlib.data.corpus` ships so that every Python version reads the same text; about
465,000 characters): offline, English, with code in it. This module holds what chapter 10 trains
and measures, so that the notebook shows the experiments and not the plumbing:

- :func:`corpus`, :class:`CharTokenizer`, :func:`splits`: the text, one id per character, and a
  contiguous 90/10 train/validation split;
- :func:`unigram_loss`, :func:`bigram_loss`: the count-based baselines, in nats per character;
- :func:`model_config`, :class:`TrainSettings`, :func:`train_model`: a 3-layer GPT (d_model 64)
  trained with :func:`mtlib.train.fit` on random windows of the training text;
- :func:`evaluate`: validation loss over every window of the validation text;
- :func:`forward_without_mask`: the "break it" model, the same GPT with the causal mask removed;
- a checkpoint (:data:`CHECKPOINT`) with the trained model of seed 0, the maskless model, and
  the report of all seeds, written by this script and loaded by the chapter and a test.

Run ``python -m mtlib.experiments.char_lm`` to train seeds 0, 1, 2 with the causal mask (2,000
steps each) and seeds 0, 1, 2 without it (800 steps each), and rewrite the checkpoint (about 15
minutes on one busy CPU thread; 3 to 6 minutes per causal seed).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from mtlib import train
from mtlib.data.corpus import pydoc_topics
from mtlib.models.gpt import GPT, GPTConfig

__all__ = [
    "CHECKPOINT",
    "CharTokenizer",
    "TrainSettings",
    "bigram_loss",
    "corpus",
    "data_seed",
    "evaluate",
    "first_below",
    "forward_without_mask",
    "last_position_losses",
    "load_checkpoint",
    "model_config",
    "smoothed",
    "splits",
    "train_model",
    "unigram_loss",
]

#: Where the chapter's checkpoint lives (inside the package, so that it installs with mtlib).
CHECKPOINT = Path(str(resources.files("mtlib.experiments"))) / "char_lm_checkpoint.pt"
VAL_FRACTION = 0.1  # the last 10% of the text is the validation split


def corpus() -> str:
    """The text of every ``help()`` topic, in sorted topic order, joined by newlines."""
    topics = pydoc_topics()

    return "\n".join(topics[key] for key in sorted(topics))


class CharTokenizer:
    """One id per distinct character of a text (sorted), and back.

    Args:
        text: the text whose characters form the vocabulary.
    """

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters."""
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """Ids (long) of shape (len(text),); a character outside the vocabulary is a KeyError."""
        return torch.tensor([self.ids[c] for c in text], dtype=torch.long)

    def decode(self, ids: Tensor | list[int]) -> str:
        """The text of a 1-D sequence of ids."""
        values = ids.tolist() if isinstance(ids, Tensor) else ids
        return "".join(self.chars[i] for i in values)


def splits() -> tuple[CharTokenizer, Tensor, Tensor]:
    """The tokenizer and the (train, validation) ids: the first 90% and the last 10% of the text."""
    text = corpus()
    tokenizer = CharTokenizer(text)
    ids = tokenizer.encode(text)  # (N,)
    cut = int(len(ids) * (1 - VAL_FRACTION))
    return tokenizer, ids[:cut], ids[cut:]


def unigram_loss(train_ids: Tensor, val_ids: Tensor, vocab_size: int) -> float:
    """Validation cross-entropy (nats/char) of character frequencies (add-one smoothed)."""
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0  # (V,)
    log_p = torch.log(counts / counts.sum())  # (V,)
    return float(-log_p[val_ids].mean())


def bigram_loss(
    train_ids: Tensor, val_ids: Tensor, vocab_size: int, *, alpha: float = 0.1
) -> float:
    """Validation cross-entropy (nats/char) of ``p(next | previous)`` counts, add-``alpha``
    smoothed; the first validation character is not scored."""
    pairs = Counter(zip(train_ids[:-1].tolist(), train_ids[1:].tolist(), strict=True))
    counts = torch.full((vocab_size, vocab_size), alpha, dtype=torch.float64)  # (V, V)
    for (a, b), n in pairs.items():
        counts[a, b] += n
    log_p = torch.log(counts / counts.sum(dim=1, keepdim=True))  # (V, V) rows: previous char
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean())


def model_config(vocab_size: int, **overrides: Any) -> GPTConfig:
    """The chapter's model: 3 layers, d_model 64, 4 heads, 64 positions (about 160k parameters)."""
    fields: dict[str, Any] = dict(block_size=64, n_layer=3, d_model=64, num_heads=4, d_ff=256)
    return GPTConfig.tiny(**{**fields, "vocab_size": vocab_size, **overrides})


@dataclass
class TrainSettings:
    """How the chapter's model is trained (AdamW through :func:`mtlib.train.fit`)."""

    steps: int = 2000  # optimizer steps
    batch_size: int = 32  # windows per batch
    lr: float = 3e-3  # peak learning rate
    warmup: int = 50  # linear warm-up steps, then cosine decay to min_factor * lr
    min_factor: float = 0.1
    clip_norm: float = 1.0


def windows(ids: Tensor, starts: Tensor, length: int) -> tuple[Tensor, Tensor]:
    """Inputs ``ids[s : s + length]`` and targets shifted by one, (B, length) each."""
    offsets = torch.arange(length, device=starts.device)  # (T,)
    index = starts[:, None] + offsets  # (B, T)
    return ids[index], ids[index + 1]


def data_seed(seed: int, step: int) -> int:
    """The seed of batch ``step``'s generator in run ``seed`` (distinct for every pair)."""
    return 1_000_003 * seed + step


def smoothed(values: list[float], window: int = 25) -> list[float]:
    """Trailing moving average: entry ``i`` is the mean of ``values[max(0, i - window + 1) : i + 1]``."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def first_below(values: list[float], threshold: float) -> int | None:
    """The first step (1-based, like :class:`~mtlib.train.History`) whose value is below
    ``threshold``, or None."""
    return next((i + 1 for i, v in enumerate(values) if v < threshold), None)


def train_model(
    settings: TrainSettings,
    *,
    seed: int = 0,
    steps: int | None = None,
    causal: bool = True,
    device: torch.device | str = "cpu",
    eval_every: int = 250,
    config_overrides: dict[str, Any] | None = None,
) -> tuple[GPT, train.History]:
    """Train the chapter's model from scratch.

    Batch ``s`` is ``batch_size`` random windows of the training text, drawn from a generator
    seeded with :func:`data_seed` ``(seed, s)``: the seed sets both the initialisation and the
    order of the data, so that the spread over seeds covers both sources of variation.

    Args:
        settings: optimiser settings.
        seed: initialisation seed.
        steps: stop after this many steps (default ``settings.steps``; the schedule still
            spans ``settings.steps``, so a short run retraces the start of a long one).
        causal: False trains :func:`forward_without_mask` instead (the "break it" model).
        device: where to train.
        eval_every: validation loss every this many steps (and at the end).
        config_overrides: changes to :func:`model_config`, e.g. ``{"block_size": 16}``.

    Returns:
        The trained model (eval mode) and the :class:`~mtlib.train.History`; its evaluations
        hold ``"val"`` (nats/char).
    """
    tokenizer, train_ids, val_ids = splits()
    torch.manual_seed(seed)
    model = GPT(model_config(tokenizer.vocab_size, **(config_overrides or {}))).to(device)
    length = model.config.block_size
    train_ids, val_ids = train_ids.to(device), val_ids.to(device)

    def batches(step: int) -> tuple[Tensor, Tensor]:
        gen = torch.Generator().manual_seed(data_seed(seed, step))
        starts = torch.randint(
            0, len(train_ids) - length - 1, (settings.batch_size,), generator=gen
        )
        return windows(train_ids, starts.to(device), length)

    def loss_fn(m: torch.nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch
        logits = m(x) if causal else forward_without_mask(model, x)
        return train.sequence_loss(logits, y)

    history = train.fit(
        model,
        loss_fn,
        batches,
        steps=steps or settings.steps,
        lr=settings.lr,
        schedule=train.warmup_cosine(
            settings.warmup, settings.steps, min_factor=settings.min_factor
        ),
        clip_norm=settings.clip_norm,
        eval_fn=lambda m: {"val": evaluate(model, val_ids, causal=causal)},
        eval_every=eval_every,
        seed=seed,
    )
    return model.eval(), history


@torch.no_grad()
def evaluate(
    model: GPT, ids: Tensor, *, causal: bool = True, last_only: bool = False, batch_size: int = 128
) -> float:
    """Mean cross-entropy (nats/char) over consecutive non-overlapping windows of ``ids``.

    Args:
        model: the GPT.
        ids: token ids (1-D).
        causal: False evaluates :func:`forward_without_mask`.
        last_only: score only each window's last position, which, like generation, has no
            future token in its input.
        batch_size: windows per forward pass.
    """
    length = model.config.block_size
    starts = torch.arange(0, len(ids) - length - 1, length, device=ids.device)  # (W,)
    total, count = 0.0, 0
    for chunk in starts.split(batch_size):
        x, y = windows(ids, chunk, length)  # (b, T) each
        logits = model(x) if causal else forward_without_mask(model, x)  # (b, T, V)
        if last_only:
            logits, y = logits[:, -1:], y[:, -1:]
        total += train.sequence_loss(logits, y).item() * y.numel()
        count += y.numel()
    return total / count


@torch.no_grad()
def last_position_losses(
    model: GPT,
    ids: Tensor,
    length: int,
    *,
    stride: int | None = None,
    causal: bool = True,
    batch_size: int = 256,
) -> Tensor:
    """The cross-entropy (nats) of the last position of windows of ``length`` tokens of ``ids``.

    The last position of a window has no future token in its input, as in generation from a
    prompt of ``length`` tokens. Their mean and its standard error (``std / sqrt(n)``) measure
    how the loss depends on the context length; ``evaluate(..., last_only=True)`` is the mean at
    ``length = block_size``.

    Args:
        model: the GPT.
        ids: token ids (1-D).
        length: window length, 1 to ``model.config.block_size``.
        stride: distance between window starts (default ``length``: non-overlapping windows;
            a smaller stride scores more positions of the same text).
        causal: False evaluates :func:`forward_without_mask`.
        batch_size: windows per forward pass.

    Returns:
        (W,) float tensor, one loss per window.
    """
    if not 1 <= length <= model.config.block_size:
        raise ValueError(f"length must be 1 to block_size={model.config.block_size}, got {length}")
    stride = length if stride is None else stride
    if stride < 1:
        raise ValueError(f"stride must be at least 1, got {stride}")
    starts = torch.arange(0, len(ids) - length - 1, stride, device=ids.device)  # (W,)
    out = []
    for chunk in starts.split(batch_size):
        x, y = windows(ids, chunk, length)  # (b, length) each
        logits = model(x) if causal else forward_without_mask(model, x)  # (b, length, V)
        out.append(F.cross_entropy(logits[:, -1].float(), y[:, -1], reduction="none"))
    return torch.cat(out)


def forward_without_mask(model: GPT, idx: Tensor) -> Tensor:
    """``model(idx)`` with the causal mask removed: every position sees the whole window,
    including the very token it is trained to predict. (B, T) -> logits (B, T, V)."""
    positions = torch.arange(idx.shape[1], device=idx.device)  # (T,)
    x = model.wte(idx) + model.wpe(positions)  # (B, T, d_model)
    for block in model.h:
        x = block(x)  # is_causal=False: the only change
    return model.lm_head(model.ln_f(x))  # (B, T, V)


# --------------------------------------------------------------------------------------------
# The checkpoint
# --------------------------------------------------------------------------------------------


def load_checkpoint(path: str | Path = CHECKPOINT) -> tuple[GPT, GPT, dict[str, Any]]:
    """The trained model (seed 0), the maskless model (seed 0) and the report of every run."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    report = state["report"]
    models = []
    for key in ("model", "maskless"):
        model = GPT(GPTConfig(**report["config"]))
        model.load_state_dict({k: v.float() for k, v in state[key].items()})
        models.append(model.eval())
    return models[0], models[1], report


def _summary(
    model: GPT, history: train.History, val_ids: Tensor, causal: bool, seconds: float
) -> dict[str, Any]:
    return {
        "loss": [round(x, 5) for x in history.loss],
        "evals": history.evals,
        "val": evaluate(model, val_ids, causal=causal),
        "val_last": evaluate(model, val_ids, causal=causal, last_only=True),
        "seconds": round(seconds, 1),
    }


def main(argv: list[str] | None = None) -> None:
    """Train every run, print the report and write the checkpoint."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=TrainSettings.steps)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--maskless-steps", type=int, default=800)
    parser.add_argument(
        "--reuse-causal",
        action="store_true",
        help="keep the causal runs of the existing checkpoint; retrain only the maskless ones",
    )
    parser.add_argument("--eval-every", type=int, default=50, help="validation every N steps")
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tokenizer, train_ids, val_ids = splits()
    settings = TrainSettings(steps=args.steps)
    report: dict[str, Any] = {
        "settings": asdict(settings),
        "eval_every": args.eval_every,
        "maskless_steps": args.maskless_steps,
        "unigram": unigram_loss(train_ids, val_ids, tokenizer.vocab_size),
        "bigram": bigram_loss(train_ids, val_ids, tokenizer.vocab_size),
        "runs": {},
    }
    saved: dict[str, dict[str, Tensor]] = {}
    if args.reuse_causal:
        old = torch.load(args.out, map_location="cpu", weights_only=True)
        saved["model"], report["config"] = old["model"], old["report"]["config"]
        report["runs"] = {k: v for k, v in old["report"]["runs"].items() if k.startswith("causal/")}
        if old["report"]["settings"] != report["settings"]:
            raise ValueError("--reuse-causal needs the checkpoint's settings (pass its --steps)")
    for causal in (False,) if args.reuse_causal else (True, False):
        kind = "causal" if causal else "maskless"
        for seed in range(args.seeds):
            start = time.perf_counter()
            steps = settings.steps if causal else args.maskless_steps
            model, history = train_model(
                settings, seed=seed, steps=steps, causal=causal, eval_every=args.eval_every
            )
            run = _summary(model, history, val_ids, causal, time.perf_counter() - start)
            curve = smoothed(run["loss"])  # 25-step moving average of the training loss
            if causal:
                run["step_val_below_1.4"] = next(
                    (e["step"] for e in history.evals if e["val"] < 1.4), None
                )
            else:  # the same model scored honestly, with the mask back on
                run["val_masked"] = evaluate(model, val_ids)
                run["val_last_masked"] = evaluate(model, val_ids, last_only=True)
                run["step_smoothed_below_1"] = first_below(curve, 1.0)
                run["step_smoothed_below_0.2"] = first_below(curve, 0.2)
            report["runs"][f"{kind}/{seed}"] = run
            print(
                kind, seed, {k: v for k, v in run.items() if k not in ("loss", "evals")}, flush=True
            )
            if seed == 0:
                saved["model" if causal else "maskless"] = {
                    k: v.detach().clone() for k, v in model.state_dict().items()
                }
                report["config"] = asdict(model.config)
    torch.save({**saved, "report": report}, args.out)
    print(
        f"unigram {report['unigram']:.3f}, bigram {report['bigram']:.3f} nats/char; wrote {args.out}"
    )


if __name__ == "__main__":
    main()
