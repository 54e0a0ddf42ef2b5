"""Chapter 8's experiment: the checkpoint loads into the current code and reproduces its
report, training retraces the script's curve, and the injected bugs do what they say.

The full reproduction (``python -m mtlib.experiments.translation``, a few minutes on one CPU
thread) is the slow test at the end, skipped unless ``MTLIB_SLOW=1``: CI runs the fast ones.
"""

import os

import pytest
import torch

from mtlib.data import PAD, encode_numbers
from mtlib.experiments import translation as tr
from mtlib.transformer import Transformer


@pytest.fixture(scope="module")
def checkpoint():
    return tr.load_checkpoint()


def test_checkpoint_is_small_and_loads_into_the_current_code(checkpoint):
    model, report = checkpoint
    assert tr.CHECKPOINT.stat().st_size < 2_000_000
    assert isinstance(model, Transformer) and not model.training
    assert report["seed"] == 0 and report["heldout_sample"] == {"n": 2000, "seed": tr.HELDOUT_SEED}
    assert sorted(report["runs"]) == [f"{k}/{s}" for k in ("none", "pooled") for s in (0, 1, 2)]


def test_checkpoint_reproduces_its_reported_accuracy(checkpoint):
    model, report = checkpoint
    got = tr.evaluate(model, tr.heldout_sample())
    expected = report["runs"]["none/0"]["greedy"]
    assert abs(got["exact"] - expected["exact"]) <= 0.001 and abs(got["token"] - expected["token"]) <= 0.001
    assert got["exact"] >= 0.99  # the chapter's claim


def test_training_retraces_the_scripts_curve(checkpoint):
    _, report = checkpoint
    _, history = tr.train_model(tr.TrainSettings(), seed=0, steps=15)
    torch.testing.assert_close(history.loss, report["runs"]["none/0"]["loss"][:15], atol=1e-4, rtol=0)


def test_shift_right_and_training_inputs():
    batch = encode_numbers(torch.tensor([7, 40519]))
    decoder_input, labels = tr.shift_right(batch.tgt)
    assert torch.equal(decoder_input[:, 1:], labels[:, :-1]) and decoder_input.shape == labels.shape
    same, _, mask = tr.training_inputs("unshifted", batch)
    assert torch.equal(same, labels) and mask is None
    _, _, leaky = tr.training_inputs("leaky_mask", batch)
    assert leaky.dtype == torch.bool and leaky.all() and leaky.shape == (labels.shape[1],) * 2


def test_injected_bugs_change_only_what_they_say():
    config = tr.model_config(d_model=32, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
    batch = encode_numbers(torch.tensor([5, 123, 40519]))
    tgt_in, _ = tr.shift_right(batch.tgt)
    torch.manual_seed(0)
    plain = Transformer(config).eval()
    with torch.no_grad():
        reference = plain(batch.src, tgt_in)
        for bug in ("no_scaling", "no_positions", "no_padding_mask"):
            buggy = tr.make_buggy(bug, config).eval()
            buggy.load_state_dict(plain.state_dict())  # same parameters, same names
            assert not torch.allclose(buggy(batch.src, tgt_in), reference, atol=1e-4), bug
        offset_zero = tr.make_buggy("offset_zero", config).eval()
        offset_zero.load_state_dict(plain.state_dict())
        torch.testing.assert_close(offset_zero(batch.src, tgt_in), reference)  # training is unchanged
    with pytest.raises(ValueError, match="bug must be one of"):
        tr.make_buggy("typo", config)


def test_pooled_control_decodes_against_the_mean_memory():
    config = tr.model_config(d_model=32, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
    torch.manual_seed(0)
    pooled = tr.PooledMemoryTransformer(config).eval()
    batch = encode_numbers(torch.tensor([5, 123456]))  # the first row is padded
    tgt_in, _ = tr.shift_right(batch.tgt)
    with torch.no_grad():
        memory = pooled.encode(batch.src)
        real = (batch.src != PAD).float()[:, :, None]  # (B, S, 1)
        mean = (memory * real).sum(1, keepdim=True) / real.sum(1, keepdim=True)  # (B, 1, d)
        expected = Transformer.decode(pooled, tgt_in, mean)
        torch.testing.assert_close(pooled(batch.src, tgt_in), expected)


@pytest.mark.skipif(not os.environ.get("MTLIB_SLOW"), reason="trains 2 models (minutes): set MTLIB_SLOW=1")
def test_script_reproduces_the_checkpoint_within_its_seed_spread(tmp_path, checkpoint):
    _, report = checkpoint
    tr.main(["--seeds", "0", "--out", str(tmp_path / "again.pt")])
    _, again = tr.load_checkpoint(tmp_path / "again.pt")
    for kind in ("none", "pooled"):
        spread = [report["runs"][f"{kind}/{s}"]["greedy"]["exact"] for s in (0, 1, 2)]
        got = again["runs"][f"{kind}/0"]["greedy"]["exact"]
        assert min(spread) - 0.01 <= got <= max(spread) + 0.01, (kind, got, spread)


def test_by_length_counts_numbers_and_errors_per_number_of_digits():
    numbers = torch.tensor([7, 40, 305, 999, 1000, 40519, 123456])
    wrong = torch.tensor([False, True, True, False, False, True, True])
    table = tr.by_length(numbers, wrong)
    assert table == {1: {"n": 1, "wrong": 0}, 2: {"n": 1, "wrong": 1}, 3: {"n": 2, "wrong": 1},
                     4: {"n": 1, "wrong": 0}, 5: {"n": 1, "wrong": 1}, 6: {"n": 1, "wrong": 1}}  # fmt: skip


def test_checkpoint_reports_every_run_by_length(checkpoint):
    _, report = checkpoint
    for key, run in report["runs"].items():
        table = run["by_length"]
        assert sum(row["n"] for row in table.values()) == report["all_heldout_n"], key
        wrong = sum(row["wrong"] for row in table.values())
        assert abs(wrong / report["all_heldout_n"] - (1 - run["all_heldout"]["exact"])) < 1e-4, key


def test_train_model_takes_a_batch_function():
    config = tr.model_config(d_model=32, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
    seen = []

    def batches(step):
        seen.append(step)
        return encode_numbers(torch.tensor([12, 345]))

    _, history = tr.train_model(tr.debug_settings(), seed=0, config=config, steps=3, batches=batches)
    assert seen == [0, 1, 2] and len(history.loss) == 3
