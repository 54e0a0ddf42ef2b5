"""Plots for the book: one style, labelled attention heatmaps, widget explorers.

Every interactive explorer also draws a static figure, so the printed page (and a reader
without a live kernel) still sees what the slider would show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes

__all__ = ["ATTENTION_CMAP", "attention_heatmap", "explorer", "set_style"]

#: Colour map used for every attention-weight plot in the book (0 = white, 1 = dark).
ATTENTION_CMAP = "Blues"


def set_style() -> None:
    """Apply the book's matplotlib style (sizes, grid, fonts). Safe to call repeatedly."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.0, 3.6),
            "figure.dpi": 150,  # the book asks for >= 150 dpi figures
            "savefig.dpi": 150,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "legend.frameon": False,
            "image.cmap": ATTENTION_CMAP,
        }
    )


def _as_2d_array(weights: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu().float().numpy()
    if not isinstance(weights, np.ndarray):
        raise TypeError(f"{name} must be a tensor or array, got {type(weights).__name__}")
    if weights.ndim != 2:
        raise ValueError(
            f"{name} must have shape (q_len, k_len), got {tuple(weights.shape)}; "
            "select one batch element and head first, e.g. weights[0, 0]"
        )
    return weights


def attention_heatmap(
    weights: torch.Tensor | np.ndarray,
    *,
    x_labels: Sequence[Any] | None = None,
    y_labels: Sequence[Any] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "key position",
    ylabel: str = "query position",
    annotate: bool = False,
    colorbar: bool = True,
    vmax: float | None = 1.0,
) -> Axes:
    """Draw attention weights as a labelled heatmap (queries down, keys across).

    Args:
        weights: (q_len, k_len) weights, each row usually summing to 1.
        x_labels: k_len labels for the keys (tokens, positions); None keeps indices.
        y_labels: q_len labels for the queries.
        ax: axes to draw on; None creates a new figure.
        title: the takeaway, e.g. "each output attends to its mirror position".
        xlabel: label of the key axis.
        ylabel: label of the query axis.
        annotate: write each weight (2 decimals) in its cell; for small matrices.
        colorbar: add a colour bar labelled "attention weight".
        vmax: top of the colour scale (1.0 keeps plots comparable); None uses the maximum.

    Returns:
        The axes drawn on.
    """
    w = _as_2d_array(weights, "weights")
    q_len, k_len = w.shape
    for labels, n, name in ((x_labels, k_len, "x_labels"), (y_labels, q_len, "y_labels")):
        if labels is not None and len(labels) != n:
            raise ValueError(
                f"{name} must have {n} entries to match weights of shape {w.shape}, got {len(labels)}"
            )
    if ax is None:
        _, ax = plt.subplots(figsize=(min(1.0 + 0.45 * k_len, 9.0), min(1.0 + 0.4 * q_len, 7.0)))
    image = ax.imshow(w, cmap=ATTENTION_CMAP, vmin=0.0, vmax=vmax, aspect="auto")
    ax.grid(False)
    if x_labels is not None:
        ax.set_xticks(range(k_len), [str(t) for t in x_labels], rotation=90 if k_len > 12 else 0)
    if y_labels is not None:
        ax.set_yticks(range(q_len), [str(t) for t in y_labels])
    if annotate:
        top = vmax if vmax is not None else float(w.max())
        for i in range(q_len):
            for j in range(k_len):
                colour = "white" if w[i, j] > 0.6 * top else "black"
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8, color=colour)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
    return ax


def explorer(
    plot_fn: Callable[..., None],
    name: str,
    values: Sequence[Any],
    *,
    static: Sequence[Any] | None = None,
    panel_size: tuple[float, float] = (3.6, 3.0),
    **fixed: Any,
) -> Any:
    """An interactive slider over one parameter, with a static figure beside it.

    First draws a static row of panels, one per value in ``static`` (for the printed page and
    for readers without a live kernel), then returns an ``ipywidgets`` slider over ``values``
    that redraws ``plot_fn`` as it moves. Without ipywidgets it returns None and the static
    figure stands alone.

    Args:
        plot_fn: ``plot_fn(ax, **{name: value}, **fixed)`` draws one panel on ``ax``.
        name: the parameter the slider moves, e.g. ``"bandwidth"``.
        values: the slider's values, in order.
        static: values drawn in the static figure; default: first, middle and last of ``values``.
        panel_size: (width, height) in inches of one static panel.
        **fixed: other keyword arguments passed unchanged to ``plot_fn``.

    Returns:
        The ``ipywidgets.interactive`` widget (displayed when it is a cell's last value), or None.
    """
    values = list(values)
    if not values:
        raise ValueError(
            "values must hold at least one value for the slider, got an empty sequence"
        )
    if not callable(plot_fn):
        raise TypeError(f"plot_fn must be callable, got {type(plot_fn).__name__}")
    if static is None:
        static = [values[i] for i in sorted({0, len(values) // 2, len(values) - 1})]
    shown = list(static)
    if not shown:
        raise ValueError("static must hold at least one value to draw, got an empty sequence")
    fig, axes = plt.subplots(
        1, len(shown), figsize=(panel_size[0] * len(shown), panel_size[1]), squeeze=False
    )
    for ax, value in zip(axes[0], shown, strict=True):
        plot_fn(ax, **{name: value}, **fixed)
    fig.tight_layout()
    plt.show()
    try:
        import ipywidgets as widgets
    except ImportError:  # pragma: no cover - depends on the environment
        return None

    def redraw(**params: Any) -> None:
        _, ax = plt.subplots(figsize=(panel_size[0] * 1.4, panel_size[1] * 1.2))
        plot_fn(ax, **params, **fixed)
        plt.show()

    start = shown[len(shown) // 2] if shown[len(shown) // 2] in values else values[0]
    slider = widgets.SelectionSlider(
        options=values, value=start, description=name, continuous_update=False
    )
    return widgets.interactive(redraw, **{name: slider})
