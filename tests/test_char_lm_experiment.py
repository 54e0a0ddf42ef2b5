"""Chapter 10's experiment: the checkpoint loads into the current code and reproduces its
report, a short run retraces the script's curve, and the maskless model is what it says.

The full reproduction (``python -m mtlib.experiments.char_lm``, about 10 minutes on one CPU
thread) is the slow test at the end, skipped unless ``MTLIB_SLOW=1``.
"""

import math
import os

import pytest
import torch

from mtlib.experiments import char_lm
from mtlib.models import GPT


@pytest.fixture(scope="module")
def checkpoint():
    return char_lm.load_checkpoint()


@pytest.fixture(scope="module")
def data():
    return char_lm.splits()


def test_checkpoint_is_small_and_loads_into_the_current_code(checkpoint):
    model, maskless, report = checkpoint
    assert char_lm.CHECKPOINT.stat().st_size < 2_000_000
    assert isinstance(model, GPT) and isinstance(maskless, GPT) and not model.training
    assert sorted(report["runs"]) == [f"{k}/{s}" for k in ("causal", "maskless") for s in (0, 1, 2)]
    assert len(report["runs"]["causal/0"]["loss"]) == report["settings"]["steps"]
    assert len(report["runs"]["maskless/0"]["loss"]) == report["maskless_steps"]


def test_checkpoint_reproduces_its_report(checkpoint, data):
    model, maskless, report = checkpoint
    tokenizer, train_ids, val_ids = data
    assert model.config.vocab_size == tokenizer.vocab_size
    assert abs(char_lm.evaluate(model, val_ids) - report["runs"]["causal/0"]["val"]) < 1e-3
    got = char_lm.evaluate(maskless, val_ids, causal=False, last_only=True)
    assert abs(got - report["runs"]["maskless/0"]["val_last"]) < 1e-3
    assert (
        abs(char_lm.bigram_loss(train_ids, val_ids, tokenizer.vocab_size) - report["bigram"]) < 1e-6
    )
    assert (
        abs(char_lm.unigram_loss(train_ids, val_ids, tokenizer.vocab_size) - report["unigram"])
        < 1e-6
    )


def test_the_chapters_claims_hold_in_the_report(checkpoint):
    _, _, report = checkpoint
    causal = [report["runs"][f"causal/{s}"] for s in range(3)]
    maskless = [report["runs"][f"maskless/{s}"] for s in range(3)]
    assert max(r["val"] for r in causal) < report["bigram"] - 0.5
    step = report["maskless_steps"]
    assert (
        max(sum(r["loss"][-20:]) / 20 for r in maskless)
        < min(sum(r["loss"][step - 20 : step]) / 20 for r in causal) - 1.0
    )
    worst_causal = max(r["val_last"] for r in causal)
    assert min(r["val_last"] for r in maskless) > max(worst_causal + 0.8, report["bigram"] - 0.2)
    assert min(r["val_masked"] for r in maskless) > math.log(report["config"]["vocab_size"])


def test_training_retraces_the_scripts_curve(checkpoint):
    _, _, report = checkpoint
    settings = char_lm.TrainSettings(**report["settings"])
    _, history = char_lm.train_model(settings, seed=0, steps=10, eval_every=10)
    torch.testing.assert_close(
        history.loss, report["runs"]["causal/0"]["loss"][:10], atol=1e-3, rtol=0
    )


def test_baselines_and_tokenizer(data):
    tokenizer, train_ids, val_ids = data
    assert tokenizer.decode(tokenizer.encode("def f(x):\n")) == "def f(x):\n"
    assert len(val_ids) == pytest.approx(0.1 * (len(train_ids) + len(val_ids)), abs=1)
    uni = char_lm.unigram_loss(train_ids, val_ids, tokenizer.vocab_size)
    bi = char_lm.bigram_loss(train_ids, val_ids, tokenizer.vocab_size)
    assert bi < uni < math.log(tokenizer.vocab_size)
    # a toy text where the bigram is exact: "abab..." -> each next char is certain
    ids = torch.tensor([0, 1] * 50)
    assert char_lm.bigram_loss(ids, ids, 2, alpha=1e-9) < 1e-6
    assert char_lm.unigram_loss(ids, ids, 2) == pytest.approx(math.log(2), abs=1e-9)


def test_the_seed_varies_the_data_too():
    # every (seed, step) pair has its own batch generator: seeds differ in data order, not
    # only in initialisation
    seeds = {char_lm.data_seed(seed, step) for seed in range(3) for step in range(1, 2001)}
    assert len(seeds) == 3 * 2000
    assert char_lm.data_seed(0, 17) == 17  # seed 0 keeps the batches it always had


def test_smoothed_and_first_below():
    values = [4.0, 2.0, 0.0, 6.0]
    assert char_lm.smoothed(values, window=2) == [4.0, 3.0, 1.0, 3.0]
    assert char_lm.smoothed(values, window=25) == [4.0, 3.0, 2.0, 3.0]
    assert char_lm.first_below(values, 2.5) == 2  # 1-based step, like History
    assert char_lm.first_below(values, -1.0) is None


def test_report_holds_the_chapters_fields(checkpoint):
    _, _, report = checkpoint
    for seed in range(3):
        causal, maskless = report["runs"][f"causal/{seed}"], report["runs"][f"maskless/{seed}"]
        step = causal["step_val_below_1.4"]
        assert step is not None and step % report["eval_every"] == 0
        assert next(e["step"] for e in causal["evals"] if e["val"] < 1.4) == step
        curve = char_lm.smoothed(maskless["loss"])
        assert maskless["step_smoothed_below_1"] == char_lm.first_below(curve, 1.0)
        assert maskless["step_smoothed_below_1"] < maskless["step_smoothed_below_0.2"]


def test_last_position_losses(checkpoint, data):
    model, maskless, _ = checkpoint
    _, _, val_ids = data
    ids = val_ids[:3001]
    full = char_lm.last_position_losses(model, ids, model.config.block_size)
    assert full.shape == (len(range(0, len(ids) - 64 - 1, 64)),)
    assert math.isclose(full.mean().item(), char_lm.evaluate(model, ids, last_only=True), rel_tol=1e-6)
    # each loss is the cross-entropy of one window's last position, scored on its own
    x, y = char_lm.windows(ids, torch.tensor([2 * 13]), 13)
    with torch.no_grad():
        one = torch.nn.functional.cross_entropy(model(x)[:, -1], y[:, -1])
    assert math.isclose(char_lm.last_position_losses(model, ids, 13, stride=13)[2].item(), one.item(), rel_tol=1e-5)
    dense = char_lm.last_position_losses(model, ids, 13, stride=5)
    assert len(dense) == len(range(0, len(ids) - 13 - 1, 5))
    # the maskless forward copies where it can: the end of a short window is far worse than uniform
    short = char_lm.last_position_losses(maskless, ids, 16, causal=False)
    assert short.mean() > math.log(model.config.vocab_size)
    for bad, match in (({"length": 0}, "length"), ({"length": 65}, "length"), ({"length": 8, "stride": 0}, "stride")):
        with pytest.raises(ValueError, match=match):
            char_lm.last_position_losses(model, ids, **bad)


def test_forward_without_mask_sees_the_future():
    torch.manual_seed(0)
    model = GPT(char_lm.model_config(11, n_layer=1)).eval()
    idx = torch.randint(0, 11, (2, 9))
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    with torch.no_grad():
        same = model(changed)[:, :-1] - model(idx)[:, :-1]
        leak = (
            char_lm.forward_without_mask(model, changed)[:, :-1]
            - char_lm.forward_without_mask(model, idx)[:, :-1]
        )
    assert same.abs().max() == 0 and leak.abs().max() > 1e-4


@pytest.mark.skipif(
    os.environ.get("MTLIB_SLOW") != "1", reason="about 10 minutes; set MTLIB_SLOW=1"
)
def test_script_reproduces_the_checkpoint(tmp_path, checkpoint):
    _, _, report = checkpoint
    out = tmp_path / "ck.pt"
    char_lm.main(["--out", str(out), "--steps", str(report["settings"]["steps"])])
    _, _, again = char_lm.load_checkpoint(out)
    for key, run in report["runs"].items():
        assert abs(again["runs"][key]["val"] - run["val"]) < 1e-3, key
