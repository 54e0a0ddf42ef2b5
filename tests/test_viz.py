import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mtlib import viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_heatmap_labels_axes_and_ticks():
    weights = torch.softmax(torch.randn(3, 5), dim=-1)  # q_len != k_len
    ax = viz.attention_heatmap(weights, x_labels=list("abcde"), y_labels=["x", "y", "z"], title="takeaway", annotate=True)
    assert ax.get_xlabel() == "key position" and ax.get_ylabel() == "query position"
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    assert ax.get_title() == "takeaway"
    assert len(ax.texts) == 15  # one annotation per weight
    image = ax.images[0].get_array()
    np.testing.assert_allclose(image, weights.numpy(), rtol=1e-6)
    assert ax.figure.axes[-1].get_ylabel() == "attention weight"  # the colour bar


def test_heatmap_draws_on_a_given_axes_without_colorbar():
    fig, ax = plt.subplots()
    assert viz.attention_heatmap(np.eye(4, 6), ax=ax, colorbar=False, vmax=None) is ax
    assert len(fig.axes) == 1


@pytest.mark.parametrize(
    "weights, kwargs, error, match",
    [
        (torch.zeros(2, 3, 4), {}, ValueError, r"weights must have shape \(q_len, k_len\), got \(2, 3, 4\)"),
        ([[0.5, 0.5]], {}, TypeError, "weights must be a tensor or array"),
        (torch.zeros(3, 4), {"x_labels": ["a"]}, ValueError, "x_labels must have 4 entries"),
        (torch.zeros(3, 4), {"y_labels": ["a"]}, ValueError, "y_labels must have 3 entries"),
    ],
)
def test_heatmap_rejects_bad_input(weights, kwargs, error, match):
    with pytest.raises(error, match=match):
        viz.attention_heatmap(weights, **kwargs)


def test_explorer_draws_static_panels_and_returns_a_slider(monkeypatch):
    calls = []

    def plot(ax, width, offset):
        calls.append((width, offset))
        ax.plot([0, 1], [offset, width])

    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(len(plt.gcf().axes)))
    widget = viz.explorer(plot, "width", [0.1, 0.2, 0.4, 0.8, 1.6], offset=3)
    assert calls[:3] == [(0.1, 3), (0.4, 3), (1.6, 3)]  # default static: first, middle, last
    assert calls[3:] == [(0.4, 3)]  # the widget draws its starting value once
    assert shown[0] == 3
    slider = widget.children[0]
    assert slider.description == "width" and list(slider.options) == [0.1, 0.2, 0.4, 0.8, 1.6] and slider.value == 0.4
    calls.clear()
    slider.value = 0.8  # moving the slider redraws with the new value
    assert (0.8, 3) in calls


def test_explorer_uses_given_static_values():
    seen = []
    viz.explorer(lambda ax, h: seen.append(h), "h", [1, 2, 3], static=[3, 1])
    assert seen[:2] == [3, 1]


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((lambda ax, h: None, "h", []), {}, ValueError, "values must hold at least one"),
        (("not callable", "h", [1]), {}, TypeError, "plot_fn must be callable"),
        ((lambda ax, h: None, "h", [1]), {"static": []}, ValueError, "static must hold at least one"),
    ],
)
def test_explorer_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        viz.explorer(*args, **kwargs)


def test_set_style_is_idempotent():
    with matplotlib.rc_context():  # leave the other tests' style alone
        matplotlib.rcdefaults()
        viz.set_style()
        once = dict(matplotlib.rcParams)
        viz.set_style()
        assert dict(matplotlib.rcParams) == once  # a second call changes nothing at all
        assert once != dict(matplotlib.rcParamsDefault)  # and the first one did something
        assert once["image.cmap"] == viz.ATTENTION_CMAP and once["figure.dpi"] == 150
