"""The length-extrapolation study of chapter 6: the script reproduces its stored table."""

import pytest
import torch

from mtlib.experiments import extrapolation
from mtlib.experiments.extrapolation_table import CONFIG, RESULTS


def test_the_stored_table_was_made_with_the_default_config_and_covers_everything():
    config = extrapolation.ExtrapolationConfig()
    stored = {k: tuple(v) if isinstance(v, list) else v for k, v in CONFIG.items()}
    assert stored == {k: v for k, v in vars(config).items() if k != "shift"}
    assert set(RESULTS) == {f"shift={s}" for s in extrapolation.SHIFTS}
    for by_scheme in RESULTS.values():
        assert set(by_scheme) == set(extrapolation.SCHEMES)
        for per_seed in by_scheme.values():
            assert len(per_seed) >= 3
            for metrics in per_seed.values():
                assert set(metrics) == {"L=32", "L=48", "L=64", "unseen", "window"}
                assert all(0.0 <= v <= 1.0 for v in metrics.values())


def test_the_script_reproduces_one_entry_of_the_table():
    """Re-train T5 on the 3-back task with seed 4 (a few seconds) and compare every metric.

    This entry tells the seeds apart (unseen 0.41 here, 0.59 to 1.00 for seeds 0-3), so a
    change in seeding, data, model or training shows up; the window control is compared too.
    """
    # conftest runs every test on one thread, as the script does
    config = extrapolation.ExtrapolationConfig(shift=3)
    live = extrapolation.run(("t5",), seeds=(4,), config=config)["t5"][4]
    stored = RESULTS["shift=3"]["t5"]["4"]
    assert set(live) == set(stored)
    others = [RESULTS["shift=3"]["t5"][s]["unseen"] for s in ("0", "1", "2", "3")]
    assert min(abs(stored["unseen"] - o) for o in others) > 0.1  # the entry identifies its seed
    for metric, value in live.items():
        assert value == pytest.approx(stored[metric], abs=0.01), metric


def test_make_batch_targets_are_the_tokens_shift_back():
    config = extrapolation.ExtrapolationConfig(shift=3)
    tokens, targets = extrapolation.make_batch(4, 10, config, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (4, 10)
    assert (targets[:, :3] == -100).all()
    assert torch.equal(targets[:, 3:], tokens[:, :7])


@pytest.mark.parametrize("scheme", extrapolation.SCHEMES)
def test_every_scheme_runs_at_every_test_length_and_is_causal(scheme):
    config = extrapolation.ExtrapolationConfig(d_model=16, num_heads=2, d_ff=8)
    torch.manual_seed(0)
    model = extrapolation.PositionModel(scheme, config).eval()
    tokens = torch.randint(config.num_symbols, (2, config.max_len))
    logits = model(tokens)
    assert logits.shape == (2, config.max_len, config.num_symbols)
    changed = tokens.clone()
    changed[:, 40] = (changed[:, 40] + 1) % config.num_symbols
    torch.testing.assert_close(model(changed)[:, :40], logits[:, :40])  # the past never sees the future


def test_learned_rows_beyond_the_training_length_get_no_gradient():
    config = extrapolation.ExtrapolationConfig(d_model=16, num_heads=2, d_ff=8)
    model = extrapolation.PositionModel("learned", config)
    tokens, targets = extrapolation.make_batch(2, config.train_len, config, torch.Generator())
    torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), targets.flatten()).backward()
    grad = model.absolute.embedding.weight.grad
    assert grad[: config.train_len].abs().sum() > 0
    assert (grad[config.train_len :] == 0).all()


def test_crop_accuracy_reads_the_unseen_positions_of_the_longest_test():
    config = extrapolation.ExtrapolationConfig(d_model=16, num_heads=2, d_ff=8, test_size=8)
    model = extrapolation.PositionModel("none", config).eval()
    value = extrapolation.crop_accuracy(model, config)
    assert 0.0 <= value <= 1.0


def test_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="scheme must be one of"):
        extrapolation.PositionModel("absolute", extrapolation.ExtrapolationConfig())
