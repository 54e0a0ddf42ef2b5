"""Transformer-XL against fixed segments (chapter 15).

Three models of the same size, trained and evaluated at the same segment length:

- ``"vanilla"``: relative positions, no memory (``mem_len=0``): every segment is read alone;
- ``"xl"``: relative positions + segment-level recurrence (the paper's model);
- ``"xl_absolute"``: the same memory, but absolute sinusoidal positions restarting in every
  segment (the "break it");
- ``"vanilla_absolute"``: no memory, absolute positions (the control: are absolute positions
  bad in themselves, or only together with memory?).

Two tasks:

- **text**: Python's ``help()`` topics at the character level (chapter 10's corpus and split),
  segments of 32, memory of 32;
- **copy**: a synthetic stream that isolates the effect. Each "document" is a random block of
  ``period`` tokens repeated ``repeats`` times, documents concatenated; every token after a
  document's first block is a copy of the token ``period`` = 24 places back, i.e. from *more
  than one segment back* (segments of 16, memory of 32). Scored on those copied tokens only.

Training follows the paper: ``batch_size`` parallel streams of the training data, read segment
after segment, memories carried from one step to the next (detached). Evaluation reads the
validation data the same way, so the vanilla model is scored on fixed, independent segments.

Run ``python -m mtlib.experiments.transformer_xl`` to train every (task, variant) for seeds 0,
1, 2 and write the checkpoint :data:`CHECKPOINT` (four seed-0 models, :data:`SAVED`, in float16, and the report of
every run; about 10 minutes on one busy CPU thread).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from mtlib import train
from mtlib.experiments import char_lm
from mtlib.models.transformer_xl import TransformerXL, TransformerXLConfig

__all__ = [
    "CHECKPOINT",
    "COPY_STEPS",
    "SAVED",
    "TASKS",
    "VARIANTS",
    "TrainSettings",
    "copy_stream",
    "evaluate",
    "load_checkpoint",
    "model_config",
    "score",
    "streams",
    "task_data",
    "train_model",
]

#: Where the chapter's checkpoint lives (inside the package, so that it installs with mtlib).
CHECKPOINT = Path(str(resources.files("mtlib.experiments"))) / "transformer_xl_checkpoint.pt"
VARIANTS = ("vanilla", "vanilla_absolute", "xl", "xl_absolute")
TASKS = ("text", "copy")
COPY_VOCAB, COPY_PERIOD, COPY_REPEATS = 16, 24, 4
COPY_STEPS = 800  # the copy task trains for fewer steps than the text
#: The seed-0 models kept in the checkpoint (all of them would not fit in 2 MB).
SAVED = ("text/vanilla", "text/xl", "text/xl_absolute", "copy/xl")


def copy_stream(
    n_docs: int, *, vocab: int = COPY_VOCAB, period: int = COPY_PERIOD,
    repeats: int = COPY_REPEATS, seed: int = 0,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Documents of one random block of ``period`` ids repeated ``repeats`` times, concatenated.

    Returns:
        ``(ids, copied)``, both of shape (n_docs * period * repeats,): the ids (long), and a bool
        that is True where the id equals the id ``period`` places back in the same document.
    """
    gen = torch.Generator().manual_seed(seed)
    blocks = torch.randint(0, vocab, (n_docs, 1, period), generator=gen)  # (D, 1, P)
    ids = blocks.expand(n_docs, repeats, period).reshape(-1)  # (D * R * P,)
    copied = torch.ones(n_docs, repeats, period, dtype=torch.bool)  # (D, R, P)
    copied[:, 0] = False  # each document's first block is random
    return ids, copied.reshape(-1)


def task_data(task: str) -> dict[str, Tensor | int]:
    """Train and validation ids (and, for ``copy``, which validation tokens are copies)."""
    if task == "text":
        tokenizer, train_ids, val_ids = char_lm.splits()
        return {"train": train_ids, "val": val_ids, "vocab": tokenizer.vocab_size}
    if task == "copy":
        train_ids, _ = copy_stream(4000, seed=1)
        val_ids, copied = copy_stream(200, seed=2)
        return {"train": train_ids, "val": val_ids, "val_scored": copied, "vocab": COPY_VOCAB}
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def model_config(task: str, variant: str, vocab_size: int) -> TransformerXLConfig:
    """The model of a (task, variant): 2 layers, d_model 64; text: seg 32, mem 32; copy: seg 16,
    mem 32."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    seg_len, mem_len = (32, 32) if task == "text" else (16, 32)
    return TransformerXLConfig.tiny(
        vocab_size=vocab_size,
        seg_len=seg_len,
        mem_len=mem_len if variant.startswith("xl") else 0,
        positions="absolute" if variant.endswith("absolute") else "relative",
    )


@dataclass
class TrainSettings:
    """How every model is trained (AdamW through :func:`mtlib.train.fit`)."""

    steps: int = 2000  # optimizer steps (segments per stream); the copy task uses 800
    batch_size: int = 16  # parallel streams
    lr: float = 3e-3  # peak learning rate
    warmup: int = 50  # linear warm-up, then cosine decay to min_factor * lr
    min_factor: float = 0.1
    clip_norm: float = 1.0


def streams(ids: Tensor, batch_size: int, *, offset: int = 0) -> Tensor:
    """Cut ``ids`` (rolled left by ``offset``) into ``batch_size`` contiguous rows (B, N // B)."""
    ids = torch.roll(ids, -offset)
    n = len(ids) // batch_size
    return ids[: n * batch_size].view(batch_size, n)  # (B, N)


def train_model(
    task: str,
    variant: str,
    settings: TrainSettings,
    *,
    seed: int = 0,
    steps: int | None = None,
    model: TransformerXL | None = None,
) -> tuple[TransformerXL, train.History]:
    """Train one model from scratch; the seed sets the initialisation and where streams start.

    Step ``s`` reads segment ``s`` of every stream (wrapping around at the end, with fresh
    memories: ``mems=None`` starts each pass); the memory returned by step ``s`` is the memory
    of step ``s + 1``.

    Args:
        task: ``"text"`` or ``"copy"``.
        variant: one of ``VARIANTS``, the model built when ``model`` is None.
        settings: the optimiser settings.
        seed: initialisation (of the built model) and where the streams start.
        steps: train only this many of ``settings.steps`` (the schedule is unchanged).
        model: train this model (in place) instead of building the variant's, e.g. a subclass
            of :class:`~mtlib.models.transformer_xl.TransformerXL` with other positions (exercise 4 of chapter 15); its
            ``vocab_size`` must be the task's.
    """
    data = task_data(task)
    torch.manual_seed(seed)
    if model is None:
        model = TransformerXL(model_config(task, variant, int(data["vocab"])))
    elif not isinstance(model, TransformerXL) or model.config.vocab_size != int(data["vocab"]):
        got = getattr(getattr(model, "config", None), "vocab_size", type(model).__name__)
        raise ValueError(f"model must be a TransformerXL with vocab_size={int(data['vocab'])} "
                         f"for task {task!r}, got {got}")  # fmt: skip
    train_ids = data["train"]
    assert isinstance(train_ids, Tensor)
    gen = torch.Generator().manual_seed(seed)
    offset = int(torch.randint(0, len(train_ids), (1,), generator=gen))
    rows = streams(train_ids, settings.batch_size, offset=offset)  # (B, N)
    seg = model.config.seg_len
    per_pass = (rows.shape[1] - 1) // seg
    state: dict[str, list[Tensor] | None] = {"mems": None}

    def batches(step: int) -> tuple[Tensor, Tensor]:
        s = step % per_pass  # fit counts steps from 0
        if s == 0:
            state["mems"] = None  # a new pass over the data starts without memory
        x = rows[:, s * seg : (s + 1) * seg + 1]  # (B, T + 1)
        return x[:, :-1], x[:, 1:]

    def loss_fn(m: torch.nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch
        logits, state["mems"] = m(x, state["mems"])
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
        seed=seed,
    )
    return model.eval(), history


@torch.no_grad()
def evaluate(
    model: TransformerXL, ids: Tensor, *, scored: Tensor | None = None, batch_size: int = 16
) -> float:
    """Mean cross-entropy (nats/token) reading ``ids`` as ``batch_size`` streams, segment after
    segment, memories carried (a model with ``mem_len=0`` reads independent segments).

    Args:
        model: the model (put in eval mode by the caller).
        ids: token ids (1-D).
        scored: optional bool of the same shape as ``ids``: score only these targets.
        batch_size: parallel streams.
    """
    rows = streams(ids, batch_size)  # (B, N)
    keep = streams(scored, batch_size) if scored is not None else torch.ones_like(rows).bool()
    seg = model.config.seg_len
    mems, total, count = None, 0.0, 0
    for s in range(0, rows.shape[1] - 1, seg):
        x, y = rows[:, s : s + seg], rows[:, s + 1 : s + seg + 1]  # (B, T) each
        x = x[:, : y.shape[1]]
        logits, mems = model(x, mems)  # (B, T, V)
        losses = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), y, reduction="none"
        )  # (B, T)
        k = keep[:, s + 1 : s + 1 + y.shape[1]]  # (B, T) targets that count
        total += float(losses[k].sum())
        count += int(k.sum())
    return total / count


def _half_state(model: TransformerXL) -> dict[str, Tensor]:
    """The weights rounded to float16 (stored that way to keep the checkpoint small)."""
    return {k: v.detach().half() for k, v in model.state_dict().items()}


def _load(state: dict[str, Tensor], config: dict[str, Any]) -> TransformerXL:
    model = TransformerXL(TransformerXLConfig(**config))
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval()


def load_checkpoint(
    path: str | Path = CHECKPOINT,
) -> tuple[dict[str, TransformerXL], dict[str, Any]]:
    """The seed-0 models, keyed ``"task/variant"``, and the report of every run."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    report = state["report"]
    models = {key: _load(state["models"][key], report["configs"][key]) for key in state["models"]}
    return models, report


def score(model: TransformerXL, task: str) -> float:
    """The chapter's metric: validation nats/char (text) or nats/copied token (copy)."""
    data = task_data(task)
    val = data["val"]
    scored = data.get("val_scored")
    assert isinstance(val, Tensor)
    return evaluate(model, val, scored=scored if isinstance(scored, Tensor) else None)


def main(argv: list[str] | None = None) -> None:
    """Train every (task, variant, seed), print the report and write the checkpoint."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=TrainSettings.steps, help="text task")
    parser.add_argument("--copy-steps", type=int, default=COPY_STEPS, help="copy task")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    every = {"text": TrainSettings(steps=args.steps), "copy": TrainSettings(steps=args.copy_steps)}
    report: dict[str, Any] = {
        "settings": {task: asdict(s) for task, s in every.items()},
        "runs": {},
        "configs": {},
    }
    saved: dict[str, dict[str, Tensor]] = {}
    for task in TASKS:
        settings = every[task]
        for variant in VARIANTS:
            for seed in range(args.seeds):
                start = time.perf_counter()
                model, history = train_model(task, variant, settings, seed=seed)
                key = f"{task}/{variant}"
                state = _half_state(model)
                model = _load(state, asdict(model.config))  # score what the checkpoint holds
                run: dict[str, Any] = {
                    "loss": [round(x, 4) for x in history.loss],
                    "val": score(model, task),
                    "seconds": round(time.perf_counter() - start, 1),
                }
                report["runs"][f"{key}/{seed}"] = run
                print(key, seed, round(run["val"], 4), run["seconds"], "s", flush=True)
                if seed == 0 and key in SAVED:
                    saved[key] = state
                    report["configs"][key] = asdict(model.config)
    report["copy_chance"] = math.log(COPY_VOCAB)
    torch.save({"models": saved, "report": report}, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
