"""Chapter 11's experiment: the checkpoint loads into the current code and reproduces its
report, training retraces the script's curve, and the helpers do what they say.

The full reproduction (``python -m mtlib.experiments.digits``, about an hour on one busy
CPU thread) is not run here.
"""

import pytest
import torch

from mtlib.data.digits import digits_split
from mtlib.experiments import digits as dg
from mtlib.models import ViT


@pytest.fixture(scope="module")
def data():
    return digits_split()


@pytest.fixture(scope="module")
def checkpoint():
    return dg.load_checkpoint()


def test_split_is_fixed_stratified_and_normalised(data):
    assert len(data.y_train) == 1438 and len(data.y_test) == 359
    assert data.y_test.bincount().min() >= 35 and data.y_test.bincount().max() <= 37
    assert abs(data.x_train.mean().item()) < 1e-5 and abs(data.x_train.std().item() - 1) < 1e-4
    again = digits_split()
    assert torch.equal(again.x_test, data.x_test) and torch.equal(again.y_train, data.y_train)
    small = data.subset(100, seed=3)
    assert small.y_train.bincount().tolist() == [10] * 10 and torch.equal(small.x_test, data.x_test)
    with pytest.raises(ValueError, match="n must be an int in"):
        data.subset(5)


def test_checkpoint_is_small_and_loads_into_the_current_code(checkpoint):
    models, report = checkpoint
    assert dg.CHECKPOINT.stat().st_size < 2_000_000
    assert sorted(models) == ["vit", "vit_nopos"]
    assert all(isinstance(m, ViT) and not m.training for m in models.values())
    assert not models["vit_nopos"].pos_embed.abs().any()
    kinds = ("vit", "vit_nopos", "cnn", "mlp")
    assert sorted(report["runs"]) == sorted(f"{k}/{s}" for k in kinds for s in dg.SEEDS)
    curves = [f"{k}/{n}/{s}" for k in ("vit", "cnn", "mlp") for n in dg.TRAIN_SIZES for s in dg.SIZE_SEEDS]
    curves += [f"mlp/{dg.TRAIN_SIZES[0]}/{s}" for s in dg.MLP_EXTRA_SEEDS]
    assert sorted(report["sizes"]) == sorted(curves)  # the MLP is the data-size curve's control
    assert sorted(report["parameters"]) == sorted(kinds)  # also when runs were kept (--keep)


def test_checkpoint_reproduces_its_report(checkpoint, data):
    models, report = checkpoint
    for kind, model in models.items():
        run = report["runs"][f"{kind}/0"]
        got = dg.accuracy(model, data.x_test, data.y_test)
        assert abs(got - run["test_accuracy"]) <= 1 / len(
            data.y_test
        )  # one image, on other hardware
        shuffled = dg.shuffle_patches(data.x_test, dg.SHUFFLE, patch=2)
        assert abs(dg.accuracy(model, shuffled, data.y_test) - run["shuffled_accuracy"]) <= 1 / len(
            data.y_test
        )
    vit = models["vit"]
    assert (
        abs(
            dg.similarity_distance_correlation(vit)
            - report["runs"]["vit/0"]["position_correlation"]
        )
        < 1e-4
    )
    agreement = dg.explanation_agreement(vit, data)
    for name, value in report["runs"]["vit/0"]["agreement"].items():
        assert abs(agreement[name] - value) < 1e-3
    shuffled = [
        dg.accuracy(vit, dg.shuffle_patches(data.x_test, order, patch=2), data.y_test)
        for order in dg.SHUFFLES
    ]
    for got, want in zip(shuffled, report["runs"]["vit/0"]["shuffled_accuracies"], strict=True):
        assert abs(got - want) <= 1 / len(data.y_test)
    assert (
        min(report["runs"][f"vit/{s}"]["test_accuracy"] for s in dg.SEEDS) >= 0.96
    )  # the chapter's claim


def test_training_retraces_the_scripts_curve(checkpoint, data):
    _, report = checkpoint
    model = dg.make_model("vit", seed=0)
    history = dg.train_classifier(
        model, data, dg.TrainSettings(**report["settings"]), seed=0, steps=10
    )
    torch.testing.assert_close(
        history.loss, report["runs"]["vit/0"]["loss"][:10], atol=1e-4, rtol=0
    )


def test_baselines_are_about_the_vits_size():
    sizes = {k: dg.count_parameters(dg.make_model(k, seed=0)) for k in ("vit", "cnn", "mlp")}
    assert sizes["vit"] == 102_666
    assert all(abs(sizes[k] / sizes["vit"] - 1) < 0.05 for k in ("cnn", "mlp"))
    nopos = dg.make_model("vit_nopos", seed=0)
    assert not nopos.pos_embed.requires_grad and dg.count_parameters(nopos) == 102_666 - 17 * 64


def test_shuffle_patches_moves_whole_patches():
    x = torch.arange(2 * 3 * 64.0).reshape(2, 3, 8, 8)
    order = torch.tensor([15, 0, 3, 2, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
    y = dg.shuffle_patches(x, order, patch=2)
    assert torch.equal(y[:, :, 0:2, 0:2], x[:, :, 6:8, 6:8])  # patch 0 <- patch 15
    assert torch.equal(y[:, :, 0:2, 2:4], x[:, :, 0:2, 0:2])  # patch 1 <- patch 0
    assert torch.equal(dg.shuffle_patches(x, torch.arange(16), patch=2), x)


class FirstPixel(torch.nn.Module):  # the logit of class 1 is the top-left pixel
    def forward(self, x):
        return torch.stack([torch.zeros(len(x)), x[:, 0, 0, 0]], dim=1)


def test_occlusion_and_correlation_helpers():
    x = torch.ones(3, 1, 4, 4)
    drop = dg.occlusion_importance(
        FirstPixel(), x, torch.ones(3, dtype=torch.long), patch=2, fill=0.0
    )
    assert drop.shape == (3, 4) and (drop[:, 0] > 0.3).all() and not drop[:, 1:].any()
    a = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    r = dg.rowwise_correlation(a, torch.tensor([[2.0, 4.0, 6.0], [1.0, 2.0, 3.0]]))
    assert abs(r[0].item() - 1) < 1e-9 and torch.isnan(r[1])
    assert dg.grid_distances(3)[0, 8].item() == pytest.approx(8**0.5)


def test_occlusion_fills():
    x, labels = torch.ones(3, 1, 4, 4), torch.ones(3, dtype=torch.long)
    model = FirstPixel()
    same = dg.occlusion_importance(model, x, labels, patch=2, fill=torch.ones(1, 1, 4, 4))
    assert not same.any()  # replacing a patch by itself changes nothing
    others = torch.ones(3, 1, 4, 4)
    others[1, 0, 0, 0] = -2.0  # only image 1's replacement differs, and only in patch 0
    drop = dg.occlusion_importance(model, x, labels, patch=2, fill=others)
    assert drop[1, 0] > 0.5 and drop[[0, 2]].abs().max() < 1e-6 and not drop[:, 1:].any()
    with pytest.raises(ValueError, match=r"fill must be a number or a tensor broadcastable to images \(3, 1, 4, 4\)"):
        dg.occlusion_importance(model, x, labels, patch=2, fill=torch.ones(2, 1, 4, 4))


def test_occlusion_reference_fills(checkpoint, data):
    vit = checkpoint[0]["vit"]
    small = dg.DigitsSplit(data.x_train, data.y_train, data.x_test[:20], data.y_test[:20], data.mean, data.std)
    blank = dg.occlusion_reference(vit, small, "background")
    torch.testing.assert_close(
        blank, dg.occlusion_importance(vit, small.x_test, small.y_test, patch=2, fill=data.background)
    )
    resampled = dg.occlusion_reference(vit, small, "resample", draws=2)
    assert resampled.shape == (20, 16) and torch.equal(resampled, dg.occlusion_reference(vit, small, "resample", draws=2))
    assert not torch.allclose(resampled, blank) and not torch.allclose(dg.occlusion_reference(vit, small, "mean"), blank)
    with pytest.raises(ValueError, match="fill must be one of"):
        dg.occlusion_reference(vit, small, "noise")
    cnn = dg.make_model("cnn", seed=0)
    assert dg.occlusion_reference(cnn, small, "mean", patch=2).shape == (20, 16)  # a CNN names its patch
    change = dg.change_size(small, "background", patch=2)
    ink = (small.x_test - data.background).reshape(20, 1, 4, 2, 4, 2).sum((1, 3, 5)).reshape(20, 16)
    torch.testing.assert_close(change, ink)  # blanking changes a patch by its ink


def test_explanation_agreement_leaves_the_model_as_it_was(checkpoint, data):
    vit = checkpoint[0]["vit"]
    small = dg.DigitsSplit(data.x_train, data.y_train, data.x_test[:12], data.y_test[:12], data.mean, data.std)
    vit.train()
    try:
        result = dg.explanation_agreement(vit, small, fill="mean")
        assert vit.training and all(p.grad is None for p in vit.parameters())
    finally:
        vit.eval()
    assert {"change", "change_inked", "top1_change", "drop_inked"} <= set(result)


def test_keep_refuses_runs_trained_with_other_settings(tmp_path):
    out = tmp_path / "digits.pt"
    dg.save_checkpoint({}, out, {"settings": {"steps": 600}, "runs": {}, "sizes": {}})
    with pytest.raises(SystemExit):
        dg.main(["--out", str(out), "--steps", "300", "--keep", "vit"])


def test_position_options_and_transform(data):
    fixed = torch.randn(17, 64, generator=torch.Generator().manual_seed(1))
    model = dg.make_model("vit", seed=0, pos_embed=fixed, freeze_pos=True)
    assert torch.equal(model.pos_embed[0], fixed) and not model.pos_embed.requires_grad
    assert dg.count_parameters(model) == 102_666 - 17 * 64
    plain = dg.make_model("vit", seed=0)
    assert plain.pos_embed.requires_grad  # the default is unchanged: learned, randomly initialised
    with pytest.raises(ValueError, match="pos_embed must be"):
        dg.make_model("vit", seed=0, pos_embed=torch.zeros(16, 64))
    with pytest.raises(ValueError, match="kind 'vit' only"):
        dg.make_model("cnn", seed=0, freeze_pos=True)
    seen = []

    def flip(images, generator):
        seen.append(tuple(images.shape))
        return images.flip(-1)

    settings = dg.TrainSettings(steps=3, batch_size=7, warmup=1)
    history = dg.train_classifier(dg.make_model("mlp", seed=0), data, settings, transform=flip)
    assert seen == [(7, 1, 8, 8)] * 3 and len(history.loss) == 3
    again = dg.train_classifier(dg.make_model("mlp", seed=0), data, settings)
    assert history.loss != again.loss  # the transform was applied
