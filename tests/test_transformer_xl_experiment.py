"""Chapter 15's experiment: the checkpoint loads into the current code and reproduces its
report, a short run retraces the script's curve, and the copy task is what it says.

The full reproduction (``python -m mtlib.experiments.transformer_xl``, about 10 minutes on one
CPU thread) is the slow test at the end, skipped unless ``MTLIB_SLOW=1``.
"""

import math
import os

import pytest
import torch

from mtlib.experiments import transformer_xl as txl
from mtlib.models.transformer_xl import TransformerXL


@pytest.fixture(scope="module")
def checkpoint():
    return txl.load_checkpoint()


def test_checkpoint_is_small_and_loads_into_the_current_code(checkpoint):
    models, report = checkpoint
    assert txl.CHECKPOINT.stat().st_size < 2_000_000
    assert sorted(models) == sorted(txl.SAVED)
    assert all(isinstance(m, TransformerXL) and not m.training for m in models.values())
    keys = [f"{t}/{v}/{s}" for t in txl.TASKS for v in txl.VARIANTS for s in range(3)]
    assert sorted(report["runs"]) == sorted(keys)
    assert len(report["runs"]["text/xl/0"]["loss"]) == report["settings"]["text"]["steps"]
    assert len(report["runs"]["copy/xl/0"]["loss"]) == report["settings"]["copy"]["steps"]
    assert models["text/xl"].config.mem_len == 32 and models["text/vanilla"].config.mem_len == 0
    assert models["text/xl_absolute"].config.positions == "absolute"


def test_checkpoint_reproduces_its_report(checkpoint):
    models, report = checkpoint
    for key, model in models.items():
        task = key.split("/")[0]
        assert abs(txl.score(model, task) - report["runs"][f"{key}/0"]["val"]) < 1e-3, key


def test_the_chapters_claims_hold_in_the_report(checkpoint):
    _, report = checkpoint

    def val(task, variant):
        return [report["runs"][f"{task}/{variant}/{s}"]["val"] for s in range(3)]

    assert max(val("text", "xl")) < min(val("text", "vanilla")) - 0.03
    assert min(val("text", "xl_absolute")) > max(val("text", "vanilla")) + 0.1
    assert min(val("text", "vanilla_absolute")) > max(val("text", "vanilla"))
    assert max(val("text", "vanilla_absolute")) < min(val("text", "xl_absolute")) - 0.3
    assert max(val("copy", "xl")) < 0.5 and min(val("copy", "vanilla")) > 2.6
    assert min(val("copy", "xl_absolute")) > 1.5
    assert report["copy_chance"] == pytest.approx(math.log(16))


def test_training_retraces_the_scripts_curve(checkpoint):
    _, report = checkpoint
    settings = txl.TrainSettings(**report["settings"]["copy"])
    _, history = txl.train_model("copy", "xl", settings, seed=0, steps=10)
    torch.testing.assert_close(
        history.loss, report["runs"]["copy/xl/0"]["loss"][:10], atol=1e-3, rtol=0
    )


def test_copy_stream_copies_from_more_than_one_segment_back():
    ids, copied = txl.copy_stream(5, seed=3)
    p = txl.COPY_PERIOD
    assert ids.shape == copied.shape == (5 * p * txl.COPY_REPEATS,)
    assert torch.equal(ids[p:][copied[p:]], ids[:-p][copied[p:]])  # every copy = 24 back
    assert copied.float().mean() == pytest.approx(1 - 1 / txl.COPY_REPEATS)
    assert not copied[:p].any() and p > txl.model_config("copy", "xl", 16).seg_len


def test_streams_and_evaluate_read_the_text_in_order():
    ids = torch.arange(50)
    rows = txl.streams(ids, 4, offset=3)
    assert rows.shape == (4, 12) and rows[0, 0] == 3 and rows[1, 0] == 15
    torch.manual_seed(0)
    model = TransformerXL(txl.model_config("copy", "xl", 16)).eval()
    ids, copied = txl.copy_stream(8, seed=4)
    whole = txl.evaluate(model, ids, batch_size=4)
    part = txl.evaluate(model, ids, scored=copied, batch_size=4)
    assert 0 < whole and 0 < part and whole != part


def test_variants_are_what_they_say():
    cfg = {v: txl.model_config("text", v, 90) for v in txl.VARIANTS}
    assert [cfg[v].mem_len for v in txl.VARIANTS] == [0, 0, 32, 32]
    assert [cfg[v].positions for v in txl.VARIANTS] == ["relative", "absolute"] * 2
    with pytest.raises(ValueError, match="variant"):
        txl.model_config("text", "xxl", 90)
    with pytest.raises(ValueError, match="task"):
        txl.task_data("poems")


@pytest.mark.skipif(
    os.environ.get("MTLIB_SLOW") != "1", reason="about 10 minutes; set MTLIB_SLOW=1"
)
def test_script_reproduces_the_checkpoint(tmp_path, checkpoint):
    _, report = checkpoint
    out = tmp_path / "ck.pt"
    txl.main(["--out", str(out)])
    _, again = txl.load_checkpoint(out)
    for key, run in report["runs"].items():
        assert abs(again["runs"][key]["val"] - run["val"]) < 1e-3, key


def test_train_model_trains_a_model_it_is_given(checkpoint):
    """Exercise 4 trains its own TransformerXL (other positions) with the chapter's loop."""
    _, report = checkpoint
    settings = txl.TrainSettings(**report["settings"]["copy"])
    config = txl.model_config("copy", "xl", int(txl.task_data("copy")["vocab"]))
    torch.manual_seed(0)
    mine = TransformerXL(config)
    before = [p.detach().clone() for p in mine.parameters()]
    model, history = txl.train_model("copy", "xl", settings, seed=0, steps=3, model=mine)
    assert model is mine and len(history.loss) == 3
    assert any(not torch.equal(a, p) for a, p in zip(before, mine.parameters(), strict=True))
    # the same seed with the model built inside: the same run
    _, built = txl.train_model("copy", "xl", settings, seed=0, steps=3)
    assert built.loss == history.loss
    with pytest.raises(ValueError, match="vocab_size"):
        txl.train_model("text", "xl", settings, seed=0, steps=1, model=mine)
