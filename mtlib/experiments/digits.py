"""A Vision Transformer on scikit-learn's 8 x 8 digits, beside a CNN and an MLP (chapter 11).

This module holds what chapter 11 trains and measures, so that the notebook shows the
experiments and not the plumbing:

- :func:`vit_config`, :class:`TrainSettings`: the chapter's ViT (patches of 2 x 2, so 16 tokens
  plus the class token, width 64, 3 Pre-LN layers) and its training recipe (AdamW, warm-up +
  cosine decay, label smoothing), through :func:`mtlib.train.fit`;
- :class:`SmallCNN` and :class:`MLP`: the baselines, sized to about the ViT's parameter count;
- :func:`train_classifier`, :func:`accuracy`: training any of them, on all or part of the
  training set, with the same recipe;
- :func:`position_similarity`: the learned position embeddings' cosine similarity against the
  distance between patches on the grid;
- :func:`occlusion_importance`: how much blanking each patch lowers the true class's probability
  (the perturbation baseline that attention rollout is checked against), and
  :func:`explanation_agreement`: rollout, attention, ink and gradient x input against it;
- a checkpoint (:data:`CHECKPOINT`) written by this script and loaded by the chapter and a test.

Run ``python -m mtlib.experiments.digits`` to train the ViT, the ViT without position
embeddings, the CNN and the MLP (6 seeds each), the ViT, the CNN and the MLP on growing subsets
of the training set (3 seeds; the MLP 10 at 100 images), and rewrite the checkpoint with that
report (58 runs, most of one to two minutes each on one busy CPU thread, the MLP's a few
seconds; the runs are independent, so they can be spread over processes). ``--keep`` copies
runs already in the checkpoint instead of retraining them (same settings only).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import train
from mtlib.data.digits import DigitsSplit, digits_split
from mtlib.models.vit import ViT, ViTConfig, attention_rollout
from mtlib.utils import fixed_generator

__all__ = [
    "CHECKPOINT",
    "FILLS",
    "MLP",
    "SmallCNN",
    "TrainSettings",
    "accuracy",
    "count_parameters",
    "grid_distances",
    "load_checkpoint",
    "make_model",
    "occlusion_importance",
    "occlusion_reference",
    "change_size",
    "position_similarity",
    "rowwise_correlation",
    "explanation_agreement",
    "shuffle_patches",
    "similarity_distance_correlation",
    "similarity_ink_correlation",
    "ink_share",
    "train_classifier",
    "vit_config",
]

#: The checkpoint this script writes and the chapter loads.
CHECKPOINT = Path(str(resources.files("mtlib.experiments"))) / "digits_checkpoint.pt"
SEEDS = tuple(range(6))  # every model of the comparison is trained with these seeds
SIZE_SEEDS = (0, 1, 2)  # the data-size curves (3 x 3 subsets x 3 models = 27 more runs)
TRAIN_SIZES = (100, 300, 700, 1438)  # training images for the data-size curves
#: The MLP is cheap (a few seconds a run): at the smallest size it gets seven more seeds.
MLP_EXTRA_SEEDS = tuple(range(3, 10))
#: the 20 fixed orders in which "break it" rearranges the 16 patches (seeds 0 to 19)
SHUFFLES = [torch.randperm(16, generator=torch.Generator().manual_seed(k)) for k in range(20)]
SHUFFLE = SHUFFLES[0]  # the first of them, the one the chapter draws


def vit_config(**overrides: Any) -> ViTConfig:
    """The chapter's ViT: 8 x 8 grey digits, 2 x 2 patches (16 tokens), width 64, 3 layers."""
    settings: dict[str, Any] = dict(
        image_size=8,
        patch_size=2,
        num_channels=1,
        d_model=64,
        num_heads=4,
        d_ff=128,
        n_layer=3,
        num_classes=10,
        dropout=0.1,
    )
    settings.update(overrides)
    return ViTConfig(**settings)


@dataclass
class TrainSettings:
    """How every model of the chapter is trained (the same recipe for the ViT and baselines)."""

    steps: int = 600  # optimizer steps (about 53 passes over the 1,438 training images)
    batch_size: int = 128  # images per step, drawn at random with replacement
    lr: float = 3e-3  # peak learning rate of AdamW
    weight_decay: float = 0.05  # AdamW's decoupled weight decay
    warmup: int = 60  # linear warm-up steps, then cosine decay to 0
    label_smoothing: float = 0.1  # on the cross-entropy


class SmallCNN(nn.Module):
    """A small convolutional network: two 3 x 3 conv layers, 2 x 2 max-pool, a third conv,
    global average pooling and a linear classifier.

    Args:
        width: channels of the first conv layer (the second and third have ``2 * width`` and
            ``4 * width``).
        num_classes: output classes.
    """

    def __init__(self, width: int = 33, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),  # (B, w, 8, 8)
            nn.GELU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),  # (B, 2w, 8, 8)
            nn.GELU(),
            nn.MaxPool2d(2),  # (B, 2w, 4, 4)
            nn.Conv2d(2 * width, 4 * width, 3, padding=1),  # (B, 4w, 4, 4)
            nn.GELU(),
            nn.AdaptiveAvgPool2d(1),  # (B, 4w, 1, 1)
            nn.Flatten(),  # (B, 4w)
        )
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """(B, 1, 8, 8) images -> (B, num_classes) logits."""
        return self.head(self.features(x))


class MLP(nn.Module):
    """A multilayer perceptron on the 64 flattened pixels: two hidden GELU layers.

    Args:
        hidden: width of both hidden layers.
        num_classes: output classes.
        dropout: dropout after each hidden layer.
    """

    def __init__(self, hidden: int = 280, num_classes: int = 10, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),  # (B, 64)
            nn.Linear(64, hidden),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        """(B, 1, 8, 8) images -> (B, num_classes) logits."""
        return self.net(x)


def make_model(
    kind: str, *, seed: int, pos_embed: Tensor | None = None, freeze_pos: bool = False
) -> nn.Module:
    """A freshly initialised model: ``"vit"``, ``"vit_nopos"`` (position embeddings zero and
    frozen), ``"cnn"`` or ``"mlp"``.

    Args:
        kind: which model.
        seed: seeds the initialisation.
        pos_embed: ViT only: initial position embeddings, (1 + N, d_model) or
            (1, 1 + N, d_model), class token first (for example fixed 2-D sinusoids).
        freeze_pos: ViT only: keep the position embeddings fixed during training.
    """
    torch.manual_seed(seed)
    if kind not in ("vit", "vit_nopos") and (pos_embed is not None or freeze_pos):
        raise ValueError(f"pos_embed and freeze_pos apply to kind 'vit' only, got kind {kind!r}")
    if kind in ("vit", "vit_nopos"):
        model = ViT(vit_config())
        if kind == "vit_nopos":
            if pos_embed is not None:
                raise ValueError("kind 'vit_nopos' has zero position embeddings: drop pos_embed")
            pos_embed, freeze_pos = torch.zeros_like(model.pos_embed), True
        if pos_embed is not None:
            if pos_embed.numel() != model.pos_embed.numel():
                raise ValueError(
                    f"pos_embed must be (1 + N, d_model) = {tuple(model.pos_embed.shape[1:])}, "
                    f"got {tuple(pos_embed.shape)}"
                )
            with torch.no_grad():
                model.pos_embed.copy_(pos_embed.reshape(model.pos_embed.shape))
        if freeze_pos:
            model.pos_embed.requires_grad_(False)  # fit() trains only what requires grad
        return model
    if kind == "cnn":
        return SmallCNN()
    if kind == "mlp":
        return MLP()
    raise ValueError(f"kind must be 'vit', 'vit_nopos', 'cnn' or 'mlp', got {kind!r}")


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def accuracy(model: nn.Module, images: Tensor, labels: Tensor) -> float:
    """Share of ``images`` (B, 1, 8, 8) that ``model`` classifies as ``labels`` (eval mode)."""
    was_training = model.training
    model.eval()
    correct = (model(images).argmax(-1) == labels).float().mean().item()
    model.train(was_training)
    return correct


def train_classifier(
    model: nn.Module,
    data: DigitsSplit,
    settings: TrainSettings | None = None,
    *,
    seed: int = 0,
    steps: int | None = None,
    transform: Callable[[Tensor, torch.Generator], Tensor] | None = None,
) -> train.History:
    """Train ``model`` in place on ``data``'s training images with the chapter's recipe.

    Batches are drawn with replacement by a generator seeded by ``(seed, step)``, so a run is
    deterministic on a given machine. Test accuracy is evaluated at the end (``history.evals``).
    ``steps`` stops the run early (the learning-rate schedule stays the full run's): the first
    ``steps`` steps of a full run, exactly. ``transform(images, generator)`` (data
    augmentation) maps each batch of training images (B, 1, 8, 8) to new ones of the same
    shape; it gets the batch's seeded generator, so an augmented run is deterministic too.
    """
    s = settings or TrainSettings()
    x, y = data.x_train, data.y_train

    def batches(step: int) -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        index = torch.randint(0, len(y), (s.batch_size,), generator=g)
        images = x[index] if transform is None else transform(x[index], g)  # (B, 1, 8, 8)
        return images, y[index]

    def loss_fn(m: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        return F.cross_entropy(m(batch[0]), batch[1], label_smoothing=s.label_smoothing)

    def evaluate(m: nn.Module) -> dict[str, float]:
        return {"test_accuracy": accuracy(m, data.x_test, data.y_test)}

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay)
    return train.fit(
        model,
        loss_fn,
        batches,
        steps=s.steps if steps is None else steps,
        optimizer=optimizer,
        schedule=train.warmup_cosine(s.warmup, s.steps),
        eval_fn=evaluate,
        eval_every=s.steps if steps is None else steps,
        seed=seed,
    )


def grid_distances(grid: int) -> Tensor:
    """Euclidean distances between the cells of a ``grid x grid`` patch grid, (N, N), row-major."""
    rows, cols = torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij")
    where = torch.stack([rows.flatten(), cols.flatten()], dim=1).float()  # (N, 2)
    return torch.cdist(where, where)  # (N, N)


def position_similarity(model: ViT | Tensor) -> tuple[Tensor, Tensor]:
    """Cosine similarity between the patches' learned position embeddings, and grid distances.

    Args:
        model: a :class:`~mtlib.models.vit.ViT`, or its ``pos_embed`` (1, 1 + N, d_model) or (1 + N, d_model).

    Returns:
        ``(similarity, distance)``, both (N, N): ``similarity[i, j]`` is the cosine of the
        embeddings of patches ``i`` and ``j`` (class token excluded), ``distance[i, j]`` their
        distance on the grid in patches.
    """
    pos = (
        (model.pos_embed if isinstance(model, ViT) else model)
        .detach()
        .reshape(-1, model_width(model))
    )
    pos = F.normalize(pos[1:], dim=-1)  # (N, d_model), unit rows
    grid = int(math.isqrt(pos.shape[0]))
    return pos @ pos.T, grid_distances(grid)  # (N, N) each


def model_width(model: ViT | Tensor) -> int:
    """d_model of a ViT or of a position-embedding tensor."""
    return model.config.d_model if isinstance(model, ViT) else int(model.shape[-1])


def _pearson(a: Tensor, b: Tensor) -> float:
    a, b = a.flatten().double(), b.flatten().double()
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


def similarity_distance_correlation(model: ViT | Tensor) -> float:
    """Pearson correlation between position similarity and grid distance over pairs i != j
    (negative when nearby patches have more similar embeddings)."""
    sim, dist = position_similarity(model)
    off = ~torch.eye(len(sim), dtype=torch.bool)
    return _pearson(sim[off], dist[off])


def ink_share(data: DigitsSplit, *, patch: int = 2) -> Tensor:
    """(N,): the share of training images in which patch ``n`` has at least one inked pixel."""
    inked = data.x_train > data.background + 1e-4  # (B, 1, S, S)
    b, c, size, _ = inked.shape
    side = size // patch
    grid = inked.reshape(b, c, side, patch, side, patch)  # (B, C, r, p, c, p)
    return grid.any(dim=5).any(dim=3).any(dim=1).float().mean(0).flatten()  # (N,)


def similarity_ink_correlation(model: ViT | Tensor, data: DigitsSplit) -> float:
    """Pearson correlation between position similarity and the difference of the patches'
    :func:`ink_share` over pairs i != j (negative when patches inked equally often have
    similar embeddings)."""
    sim, _ = position_similarity(model)
    share = ink_share(data)
    off = ~torch.eye(len(sim), dtype=torch.bool)
    return _pearson(sim[off], (share[:, None] - share[None, :]).abs()[off])


@torch.no_grad()
def occlusion_importance(
    model: nn.Module, images: Tensor, labels: Tensor, *, patch: int, fill: float | Tensor
) -> Tensor:
    """How much removing each patch lowers the probability of the true class.

    What "removing" means is the ``fill``, and the answer depends on it (chapter 11.6): a blank
    patch, the training set's mean patch, or the same patch of another image.

    Args:
        model: a classifier of (B, C, S, S) images.
        images: (B, C, S, S).
        labels: (B,) true classes.
        patch: side of the square patches, dividing S.
        fill: what a removed patch becomes: a number for every pixel (the normalised background
            blanks it), or a tensor broadcastable to ``images`` whose pixels at the patch's place
            replace it: a (1, C, S, S) per-pixel mean, or (B, C, S, S) other images.

    Returns:
        A ``(B, N)`` tensor: the log-probability of the true class on the intact image minus
        on the image with patch ``n`` (row-major) replaced (log-probabilities do not saturate
        near 1).
    """
    if isinstance(fill, Tensor):
        try:
            fill = fill.to(images).expand_as(images)  # the images' dtype and device
        except RuntimeError:
            raise ValueError(
                f"fill must be a number or a tensor broadcastable to images {tuple(images.shape)}, "
                f"got shape {tuple(fill.shape)}"
            ) from None
    was_training = model.training
    model.eval()
    side = images.shape[-1] // patch
    base = model(images).log_softmax(-1).gather(1, labels[:, None])[:, 0]  # (B,)
    drops = []
    for n in range(side * side):
        row, col = divmod(n, side)
        occluded = images.clone()
        rows, cols = slice(row * patch, (row + 1) * patch), slice(col * patch, (col + 1) * patch)
        occluded[..., rows, cols] = fill[..., rows, cols] if isinstance(fill, Tensor) else fill
        p = model(occluded).log_softmax(-1).gather(1, labels[:, None])[:, 0]  # (B,)
        drops.append(base - p)
    model.train(was_training)
    return torch.stack(drops, dim=1)  # (B, N)


def shuffle_patches(images: Tensor, order: Tensor, *, patch: int) -> Tensor:
    """Rearrange the patches of ``images`` (B, C, S, S): patch ``n`` of the result (row-major) is
    patch ``order[n]`` of the input. Each patch stays intact; only where it sits changes."""
    b, c, size, _ = images.shape
    side = size // patch
    x = images.reshape(b, c, side, patch, side, patch).permute(
        0, 2, 4, 1, 3, 5
    )  # (B, r, c, C, p, p)
    x = x.reshape(b, side * side, c, patch, patch)[:, order]  # (B, N, C, p, p), reordered
    x = x.reshape(b, side, side, c, patch, patch).permute(0, 3, 1, 4, 2, 5)  # (B, C, r, p, c, p)
    return x.reshape(b, c, size, size)


def rowwise_correlation(a: Tensor, b: Tensor) -> Tensor:
    """Pearson correlation of each row of ``a`` with the same row of ``b`` (both (B, N)); rows
    where either is constant give NaN."""
    a = a.double() - a.double().mean(-1, keepdim=True)
    b = b.double() - b.double().mean(-1, keepdim=True)
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))  # (B,)


def _inked_correlation(a: Tensor, b: Tensor, inked: Tensor, *, least: int = 4) -> float:
    """Mean over rows of the correlation of ``a`` and ``b`` (B, N) restricted to the row's
    ``inked`` (B, N) entries; rows with fewer than ``least`` of them are skipped."""
    values = [
        float(rowwise_correlation(a[i : i + 1, keep], b[i : i + 1, keep])[0])
        for i, keep in enumerate(inked)
        if int(keep.sum()) >= least
    ]
    result = torch.tensor(values)
    return float(result[~result.isnan()].mean())


#: What :func:`occlusion_reference` can put in place of a removed patch.
FILLS = ("background", "mean", "resample")


def _fill_draws(data: DigitsSplit, fill: str, draws: int, seed: int) -> list[Tensor]:
    """The replacement images of one occlusion reference: one for ``background`` and ``mean``,
    ``draws`` batches of random training images (one per test image) for ``resample``."""
    x = data.x_test
    if fill == "background":
        return [torch.full_like(x[:1], data.background)]
    if fill == "mean":
        return [data.x_train.mean(0, keepdim=True).to(x)]
    if fill == "resample":
        generator = fixed_generator(seed)
        picks = [torch.randint(len(data.x_train), (len(x),), generator=generator) for _ in range(draws)]
        return [data.x_train[i].to(x) for i in picks]
    raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")


def _per_patch(values: Tensor, patch: int) -> Tensor:
    """(B, C, S, S) -> (B, N): ``values`` summed over each patch (row-major)."""
    b, c, size, _ = values.shape
    side = size // patch
    return values.reshape(b, c, side, patch, side, patch).sum((1, 3, 5)).reshape(b, -1)


def occlusion_reference(
    model: nn.Module,
    data: DigitsSplit,
    fill: str = "background",
    *,
    patch: int | None = None,
    draws: int = 8,
    seed: int = 0,
) -> Tensor:
    """:func:`occlusion_importance` on the test images, under one of :data:`FILLS`.

    ``background`` blanks the patch; ``mean`` puts the training set's mean pixels there;
    ``resample`` puts the same patch of a random training image there (a real piece of
    handwriting, drawn from its marginal distribution) and averages the drop over ``draws``
    draws, taken from a generator seeded with ``seed`` as written
    (:func:`mtlib.utils.fixed_generator`), so the reference is the same under the seed sweep.

    Args:
        patch: side of the patches; by default the model's ``config.patch_size`` (a ViT).

    Returns:
        ``(B_test, N)`` drops in the true class's log-probability.
    """
    patch_size: int = model.config.patch_size if patch is None else patch  # type: ignore[union-attr,assignment]
    drops = [  # occlusion_importance runs without autograd
        occlusion_importance(model, data.x_test, data.y_test, patch=patch_size, fill=f)
        for f in _fill_draws(data, fill, draws, seed)
    ]
    return torch.stack(drops).mean(0)


def change_size(
    data: DigitsSplit, fill: str = "background", *, patch: int, draws: int = 8, seed: int = 0
) -> Tensor:
    """How much :func:`occlusion_reference`'s ``fill`` changes each patch of the test images:
    the sum of ``|pixel - replacement|`` over the patch, averaged over the draws (B_test, N). It
    needs no model; under ``background`` it is the ink in the patch."""
    changes = [
        _per_patch((data.x_test - f.expand_as(data.x_test)).abs(), patch)
        for f in _fill_draws(data, fill, draws, seed)
    ]
    return torch.stack(changes).mean(0)


def explanation_agreement(
    model: ViT, data: DigitsSplit, *, fill: str = "background", draws: int = 8, seed: int = 0
) -> dict[str, float]:
    """How well cheap explanations agree with occlusion (:func:`occlusion_reference`).

    The scores per test image and patch are: attention rollout (class-token row), the last
    layer's class-token attention (head mean), the ink in the patch, gradient x input (the
    gradient of the true class's log-probability times the pixels' distance to the
    background, summed over the patch), and the size of the change the reference makes to the
    patch (:func:`change_size`, which needs no model). ``fill``, ``draws`` and ``seed`` choose
    the occlusion reference (:data:`FILLS`); the script stored the ``background`` one for every
    seed. The model's mode and its parameters' ``.grad`` are left as they were.

    Returns:
        ``rollout``, ``last_layer``, ``ink``, ``grad_input``, ``change``: mean per-image Pearson
        correlation with the occlusion drop over all 16 patches; ``*_inked``: the same over the
        inked patches only (images with at least 4 of them); ``top1_*``: share of images whose
        highest-scoring patch is occlusion's most important one; ``top1_chance``: the mean of
        1 / (number of inked patches), the hit rate of a random inked patch (chance for the
        blank reference, whose top patch is always inked); ``blank_share``: share of (image,
        patch) pairs without ink (blanking those changes nothing; other fills do change them);
        ``rollout_top_blank``: share of images whose top rollout patch has no ink;
        ``drop_inked``: the mean occlusion drop over inked patches, in nats.
    """
    was_training = model.training
    model.eval()
    patch = model.config.patch_size
    with torch.no_grad():
        _, attentions = model.forward_features(data.x_test, return_attentions=True)
    drop = occlusion_reference(model, data, fill, draws=draws, seed=seed)
    rollout = attention_rollout(attentions)[:, 0, 1:]  # (B, N): class token <- patches
    last = attentions[-1].mean(1)[:, 0, 1:]  # (B, N)
    pixels = data.x_test - data.background  # ink: 0 on blank pixels
    ink = _per_patch(pixels, patch)  # (B, N)
    x = data.x_test.clone().requires_grad_(True)
    log_p = model(x).log_softmax(-1).gather(1, data.y_test[:, None]).sum()
    (grad,) = torch.autograd.grad(log_p, x)  # the input's gradient only: no parameter .grad
    grad_input = _per_patch(grad * pixels, patch)  # (B, N)
    model.train(was_training)
    change = change_size(data, fill, patch=patch, draws=draws, seed=seed)
    inked = ink > 1e-4  # (B, N)
    scores = {"rollout": rollout, "last_layer": last, "ink": ink, "grad_input": grad_input, "change": change}
    result = {name: float(rowwise_correlation(drop, s).nanmean()) for name, s in scores.items()}
    for name, s in scores.items():
        result[f"{name}_inked"] = _inked_correlation(drop, s, inked)
    top = drop.argmax(-1)  # (B,)
    for name in ("rollout", "ink", "grad_input", "change"):
        result[f"top1_{name}"] = float((scores[name].argmax(-1) == top).float().mean())
    result["top1_chance"] = float((1 / inked.sum(-1).float()).mean())
    result["blank_share"] = float((~inked).float().mean())
    result["rollout_top_blank"] = float((~inked.gather(1, rollout.argmax(-1, keepdim=True))).float().mean())
    result["drop_inked"] = float(drop[inked].mean())
    return result


# --------------------------------------------------------------------------------------------
# The script: train everything, write the checkpoint
# --------------------------------------------------------------------------------------------


def save_checkpoint(models: dict[str, nn.Module], path: Path, report: dict[str, Any]) -> None:
    """Save the models' weights (by name) and the report."""
    torch.save({"models": {k: m.state_dict() for k, m in models.items()}, "report": report}, path)


def load_checkpoint(path: Path | None = None) -> tuple[dict[str, nn.Module], dict[str, Any]]:
    """The trained seed-0 models (``"vit"``, ``"vit_nopos"``) in eval mode, and the report."""
    state = torch.load(path or CHECKPOINT, map_location="cpu", weights_only=True)
    models: dict[str, nn.Module] = {}
    for name, weights in state["models"].items():
        model = make_model(name, seed=0)
        model.load_state_dict(weights)
        models[name] = model.eval()
    return models, state["report"]


def _summary(values: list[float]) -> str:
    return f"mean {sum(values) / len(values):.4f}, min {min(values):.4f}, max {max(values):.4f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    parser.add_argument("--steps", type=int, default=TrainSettings().steps)
    parser.add_argument(
        "--keep",
        default="",
        help="comma-separated kinds (vit, vit_nopos, cnn, mlp, sizes) whose runs are copied from "
        "the existing checkpoint instead of retrained, where it has them (same settings)",
    )
    args = parser.parse_args(argv)
    keep_kinds = {k for k in args.keep.split(",") if k}
    old: dict[str, Any] = {"runs": {}, "sizes": {}}
    old_models: dict[str, nn.Module] = {}
    settings = replace(TrainSettings(), steps=args.steps, warmup=max(1, args.steps // 10))
    if keep_kinds and args.out.exists():
        old_models, old = load_checkpoint(args.out)
        if old["settings"] != asdict(settings):
            parser.error(f"--keep: the checkpoint's runs used other settings ({old['settings']})")
    torch.set_num_threads(1)
    data = digits_split()
    report: dict[str, Any] = {"settings": asdict(settings), "split": {"seed": 0, "test_fraction": 0.2},
                              "runs": {}, "sizes": {}, "parameters": {}}  # fmt: skip
    keep: dict[str, nn.Module] = {}
    for kind in ("vit", "vit_nopos", "cnn", "mlp"):
        report["parameters"][kind] = count_parameters(make_model(kind, seed=0))  # kept runs too
        accs = []
        for seed in SEEDS:
            kept = kind in keep_kinds and f"{kind}/{seed}" in old["runs"]
            if kept and (seed != 0 or kind in old_models or kind not in ("vit", "vit_nopos")):
                report["runs"][f"{kind}/{seed}"] = old["runs"][f"{kind}/{seed}"]
                if seed == 0 and kind in old_models:
                    keep[kind] = old_models[kind]
                accs.append(old["runs"][f"{kind}/{seed}"]["test_accuracy"])
                print(f"{kind} seed {seed}: kept from the checkpoint", flush=True)
                continue
            start = time.perf_counter()
            model = make_model(kind, seed=seed)
            history = train_classifier(model, data, settings, seed=seed)
            run: dict[str, Any] = {
                "test_accuracy": history.last_eval()["test_accuracy"],
                "train_accuracy": accuracy(model, data.x_train, data.y_train),
                "loss": history.loss,
                "seconds": time.perf_counter() - start,
            }
            if isinstance(model, ViT):
                run["shuffled_accuracies"] = [
                    accuracy(model, shuffle_patches(data.x_test, order, patch=2), data.y_test)
                    for order in SHUFFLES
                ]
                run["shuffled_accuracy"] = run["shuffled_accuracies"][0]
                if kind == "vit":
                    run["pos_embed"] = model.pos_embed[0].tolist()  # (1 + N, d_model)
                    run["position_correlation"] = similarity_distance_correlation(model)
                    run["ink_correlation"] = similarity_ink_correlation(model, data)
                    run["agreement"] = explanation_agreement(model, data)
            report["runs"][f"{kind}/{seed}"] = run
            accs.append(run["test_accuracy"])
            if seed == 0 and kind in ("vit", "vit_nopos"):
                keep[kind] = model
            print(f"{kind} seed {seed}: test {run['test_accuracy']:.4f} "
                  f"train {run['train_accuracy']:.4f} ({run['seconds']:.0f} s)", flush=True)  # fmt: skip
        print(f"{kind}: {_summary(accs)}", flush=True)
    for kind in ("vit", "cnn", "mlp"):
        for n in TRAIN_SIZES[:-1]:
            extra = MLP_EXTRA_SEEDS if kind == "mlp" and n == TRAIN_SIZES[0] else ()
            for seed in SIZE_SEEDS + extra:
                if "sizes" in keep_kinds and f"{kind}/{n}/{seed}" in old["sizes"]:
                    report["sizes"][f"{kind}/{n}/{seed}"] = old["sizes"][f"{kind}/{n}/{seed}"]
                    continue
                model = make_model(kind, seed=seed)
                history = train_classifier(model, data.subset(n, seed=seed), settings, seed=seed)
                acc = history.last_eval()["test_accuracy"]
                report["sizes"][f"{kind}/{n}/{seed}"] = acc
                print(f"{kind} on {n} images, seed {seed}: test {acc:.4f}", flush=True)
        for seed in SIZE_SEEDS:  # the full training set: the runs above
            report["sizes"][f"{kind}/{TRAIN_SIZES[-1]}/{seed}"] = report["runs"][f"{kind}/{seed}"][
                "test_accuracy"
            ]
    save_checkpoint(keep, args.out, report)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
