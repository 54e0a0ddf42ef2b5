"""A small, readable training loop: schedules, a loss for sequences, and :func:`fit`.

Everything a chapter needs to train a model in a few lines, and nothing hidden::

    from mtlib import train

    history = train.fit(
        model,
        loss_fn=lambda m, batch: train.sequence_loss(m(batch.src), batch.tgt, pad_id=0),
        batches=lambda step: make_batch(step),  # step -> batch, deterministic
        steps=500,
        lr=3e-3,
        schedule=train.warmup_cosine(50, 500),
        clip_norm=1.0,
        seed=0,
    )
    plt.plot(history.steps, history.loss)

Learning-rate schedules are plain functions ``step -> factor`` (steps count from 0): the learning
rate of step ``s`` is ``lr * schedule(s)``. They also work with PyTorch's
``torch.optim.lr_scheduler.LambdaLR``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import _checks
from mtlib.utils import seed_everything

__all__ = ["History", "constant", "fit", "inverse_sqrt", "sequence_loss", "warmup_cosine"]

Schedule = Callable[[int], float]


# --------------------------------------------------------------------------------------------
# Learning-rate schedules: step -> multiplier of the base learning rate
# --------------------------------------------------------------------------------------------


def constant() -> Schedule:
    """The constant schedule: factor 1.0 at every step."""

    def factor(step: int) -> float:
        return 1.0

    return factor


def warmup_cosine(warmup: int, total: int, *, min_factor: float = 0.0) -> Schedule:
    """Linear warm-up, then cosine decay.

    The factor rises linearly from ``1/warmup`` (step 0) to 1 (step ``warmup - 1``), stays 1 at
    step ``warmup``, then follows half a cosine down to ``min_factor`` at step ``total`` and stays
    there. ``warmup=0`` is a plain cosine decay.

    Args:
        warmup: number of warm-up steps, >= 0.
        total: step at which the decay ends, > ``warmup``.
        min_factor: final factor, in [0, 1].
    """
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if isinstance(total, bool) or not isinstance(total, int) or total <= warmup:
        raise ValueError(f"total must be an int > warmup={warmup}, got {total!r}")
    if not 0.0 <= min_factor <= 1.0:
        raise ValueError(f"min_factor must be in [0, 1], got {min_factor!r}")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / (total - warmup))
        return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def inverse_sqrt(warmup: int, *, d_model: int | None = None) -> Schedule:
    """The schedule of Vaswani et al. (2017): linear warm-up, then decay as 1/sqrt(step).

    With ``d_model`` it is the paper's formula, ``d_model**-0.5 * min(n**-0.5, n * warmup**-1.5)``
    with ``n = step + 1`` (use it with ``lr=1.0``). With ``d_model=None`` it is normalised so that
    the peak, at ``n == warmup``, is 1.0 (use it with ``lr`` = the peak learning rate).

    Args:
        warmup: number of warm-up steps, >= 1.
        d_model: model width for the paper's scale, or None to normalise the peak to 1.
    """
    _checks.positive_int(warmup, "warmup")
    if d_model is not None:
        _checks.positive_int(d_model, "d_model")
    scale = warmup**0.5 if d_model is None else d_model**-0.5

    def factor(step: int) -> float:
        n = step + 1
        return scale * min(n**-0.5, n * warmup**-1.5)

    return factor


# --------------------------------------------------------------------------------------------
# Loss
# --------------------------------------------------------------------------------------------


def sequence_loss(
    logits: Tensor, targets: Tensor, *, pad_id: int | None = None, label_smoothing: float = 0.0
) -> Tensor:
    """Cross-entropy averaged over the non-pad target tokens of a batch of sequences.

    Args:
        logits: scores of shape (B, T, V).
        targets: token ids (long) of shape (B, T); positions equal to ``pad_id`` are ignored.
        pad_id: the padding id, or None when nothing is padded.
        label_smoothing: in [0, 1): the share of each target's probability spread evenly over
            the vocabulary (Szegedy et al., 2016), as in ``F.cross_entropy``.

    Returns:
        A scalar tensor (NaN if every target is padding).
    """
    _checks.float_tensor(logits, "logits", "(batch, seq_len, vocab)", (None, None, None))
    expected = f"(batch={logits.shape[0]}, seq_len={logits.shape[1]}) like logits"
    if not isinstance(targets, Tensor) or targets.dtype != torch.long:
        got = targets.dtype if isinstance(targets, Tensor) else type(targets).__name__
        raise TypeError(f"targets must be a long Tensor of shape {expected}, got {got}")
    if tuple(targets.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"targets must have shape {expected}, got {tuple(targets.shape)}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),  # (B*T, V)
        targets.reshape(-1),  # (B*T,)
        ignore_index=-100 if pad_id is None else pad_id,
        label_smoothing=label_smoothing,
    )


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


@dataclass
class History:
    """What :func:`fit` records, one entry per training step (and one dict per evaluation).

    Attributes:
        steps: step index (from 0) of each entry.
        loss: training loss of the step's batch, before the update.
        lr: learning rate used for the step (first parameter group).
        grad_norm: global gradient norm of the step, before clipping.
        evals: one dict per evaluation: ``"step"`` (optimizer steps done) plus eval_fn's metrics.
        stopped_early: True if ``stop_when`` ended training.
    """

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    evals: list[dict[str, float]] = field(default_factory=list)
    stopped_early: bool = False

    def last_eval(self) -> dict[str, float]:
        """The most recent evaluation's metrics (with its ``"step"``)."""
        if not self.evals:
            raise ValueError("no evaluation was run: pass eval_fn to fit()")
        return self.evals[-1]


def _default_optimizer(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """AdamW(lr, betas=(0.9, 0.98), weight_decay=0): the fused kernel where the device has one.

    The fused kernel computes the same update in one call instead of a loop over the
    parameters, about 10x faster for the book's small models on a CPU.
    """
    kwargs: dict[str, Any] = {"lr": lr, "betas": (0.9, 0.98), "weight_decay": 0.0}
    try:
        return torch.optim.AdamW(params, fused=True, **kwargs)
    except (RuntimeError, ValueError):  # no fused kernel for this device or PyTorch version
        return torch.optim.AdamW(params, **kwargs)


def _grad_norm(params: list[nn.Parameter]) -> Tensor:
    """Global L2 norm of all gradients (as ``clip_grad_norm_`` computes it, without clipping)."""
    norms = [torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.tensor(0.0)


def _evaluate(
    model: nn.Module, eval_fn: Callable[[nn.Module], dict[str, float]]
) -> dict[str, float]:
    """Run ``eval_fn`` in eval mode without gradients, leaving the mode and the RNG as they were."""
    devices = [p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"][:1]
    was_training = model.training
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        model.eval()
        try:
            metrics = eval_fn(model)
        finally:
            model.train(was_training)
    if not isinstance(metrics, dict):
        raise TypeError(f"eval_fn must return a dict of metrics, got {type(metrics).__name__}")
    return {k: float(v) for k, v in metrics.items()}


def fit(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], Tensor],
    batches: Callable[[int], Any],
    *,
    steps: int,
    lr: float = 1e-3,
    optimizer: torch.optim.Optimizer | None = None,
    schedule: Schedule | None = None,
    clip_norm: float | None = None,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int = 100,
    stop_when: Callable[[dict[str, float]], bool] | None = None,
    seed: int | None = None,
    progress: bool = False,
    checkpoint: str | Path | None = None,
    resume: str | Path | None = None,
) -> History:
    """Train ``model`` for ``steps`` optimizer steps and return what happened.

    Each step ``s``: set the learning rate to ``lr * schedule(s)``, compute
    ``loss_fn(model, batches(s))``, backpropagate, record the gradient norm, clip it to
    ``clip_norm``, update. Every ``eval_every`` steps and after the last one, ``eval_fn(model)``
    runs in eval mode without gradients (and without touching the training RNG); ``stop_when``
    on its result can end training early. The model is in train mode during steps, and its
    mode is restored at the end.

    Args:
        model: the module to train (in place).
        loss_fn: ``(model, batch) -> scalar loss``.
        batches: ``step -> batch``; make it deterministic (e.g. a generator seeded by the step).
        steps: total number of optimizer steps (counting those done before a resume).
        lr: base learning rate of the default optimizer (ignored if ``optimizer`` is given:
            then each group's own ``lr`` is the base).
        optimizer: defaults to ``AdamW(lr, betas=(0.9, 0.98), weight_decay=0.0)``, fused
            where the device has the kernel.
        schedule: learning-rate factor per step; default :func:`constant`.
        clip_norm: clip the global gradient norm to this value; None = no clipping.
        eval_fn: ``model -> {"metric": value}``.
        eval_every: evaluate every this many steps (and after the last).
        stop_when: ``metrics -> bool``; True stops training after that evaluation.
        seed: seed Python, NumPy and torch before training (dropout, sampling) for a
            deterministic run; on resume the checkpoint's RNG state replaces it.
        progress: show a tqdm progress bar (off by default: notebooks stay clean).
        checkpoint: file to save model, optimizer, step, RNG state and history to at the end.
        resume: checkpoint file to continue from: the next step is the one an uninterrupted
            run would take, bit for bit on CPU.

    Returns:
        The :class:`History` (on resume, it continues the checkpoint's history).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    for name, fn in (("loss_fn", loss_fn), ("batches", batches)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    _checks.positive_int(steps, "steps")
    _checks.positive_int(eval_every, "eval_every")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0 or None, got {clip_norm!r}")
    if stop_when is not None and eval_fn is None:
        raise ValueError("stop_when needs eval_fn: it decides on an evaluation's metrics")
    if seed is not None:
        seed_everything(seed)
    schedule = constant() if schedule is None else schedule
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer is None:
        optimizer = _default_optimizer(params, lr)
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])  # the base that the schedule multiplies
    history, start = History(), 0
    if resume is not None:
        state = torch.load(resume, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        history, start = History(**state["history"]), state["step"]

    from tqdm.auto import tqdm  # type: ignore[import-untyped]  # tqdm ships no type hints

    was_training = model.training
    model.train()
    bar = tqdm(range(start, steps), disable=not progress, leave=False, desc="fit")
    done = start  # optimizer steps done
    try:
        for step in bar:
            factor = schedule(step)
            for group in optimizer.param_groups:
                group["lr"] = group["initial_lr"] * factor
            loss = loss_fn(model, batches(step))
            if not isinstance(loss, Tensor) or loss.dim() != 0:
                raise ValueError(
                    f"loss_fn must return a scalar tensor, got {_checks.shape_of(loss)}"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip_norm is None:
                norm = _grad_norm(params)
            else:  # rescale the gradients so that their global norm is at most clip_norm
                norm = torch.nn.utils.clip_grad_norm_(params, clip_norm)  # the norm before
            optimizer.step()
            history.steps.append(step)
            history.loss.append(loss.item())
            history.lr.append(optimizer.param_groups[0]["lr"])
            history.grad_norm.append(norm.item())
            done = step + 1
            if progress and step % 10 == 0:
                bar.set_postfix(loss=f"{history.loss[-1]:.3f}")
            if eval_fn is not None and (done % eval_every == 0 or done == steps):
                history.evals.append({"step": done, **_evaluate(model, eval_fn)})
                if stop_when is not None and stop_when(history.evals[-1]):
                    history.stopped_early = True
                    break
    finally:
        bar.close()
        model.train(was_training)
    if checkpoint is not None:
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": done,
            "rng": torch.get_rng_state(),
            "history": asdict(history),
        }
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        torch.save(state, checkpoint)
    return history
