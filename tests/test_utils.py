import os
import random

import numpy as np
import pytest
import torch

import mtlib
from mtlib import utils


def test_version_is_a_string():
    assert isinstance(mtlib.__version__, str) and mtlib.__version__.count(".") == 2


def test_seed_everything_reproduces_all_three_generators():
    utils.seed_everything(7)
    first = (random.random(), np.random.rand(), torch.rand(3))
    utils.seed_everything(7)
    second = (random.random(), np.random.rand(), torch.rand(3))
    assert first[0] == second[0] and first[1] == second[1]
    torch.testing.assert_close(first[2], second[2], rtol=0, atol=0)


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_seed_everything_rejects_bad_seeds(bad, error):
    with pytest.raises(error, match="seed"):
        utils.seed_everything(bad)


def test_get_device_defaults_to_the_best_available(monkeypatch):
    monkeypatch.delenv(utils.DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(utils, "_mps_available", lambda: False)
    assert utils.get_device() == torch.device("cpu")
    monkeypatch.setattr(utils, "_mps_available", lambda: True)
    assert utils.get_device() == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert utils.get_device() == torch.device("cuda")


def test_environment_variable_overrides_the_choice(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv(utils.DEVICE_ENV, "cpu")
    assert utils.get_device() == torch.device("cpu")
    assert utils.get_device("cuda:1") == torch.device("cuda:1")  # the argument wins over the variable


def test_unknown_or_unavailable_devices_are_named_in_the_error(monkeypatch):
    monkeypatch.setenv(utils.DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match="MTLIB_DEVICE.*'tpu'"):
        utils.get_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="cuda is not available"):
        utils.get_device("cuda")


def test_setup_seeds_and_returns_the_device(monkeypatch):
    monkeypatch.setenv(utils.DEVICE_ENV, "cpu")
    assert utils.setup(seed=3, style=False) == torch.device("cpu")
    a = torch.rand(2)
    utils.setup(seed=3)
    torch.testing.assert_close(a, torch.rand(2), rtol=0, atol=0)


def test_setup_sets_the_cpu_threads_and_can_leave_them(monkeypatch):
    monkeypatch.setenv(utils.DEVICE_ENV, "cpu")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        utils.setup(style=False)
        assert torch.get_num_threads() == 1  # the book's default
        torch.set_num_threads(2)
        utils.setup(style=False, threads=None)
        assert torch.get_num_threads() == 2
        for bad in (0, 1.5, True):
            with pytest.raises(ValueError, match="threads must be an int >= 1 or None"):
                utils.setup(style=False, threads=bad)
    finally:
        torch.set_num_threads(before)


def test_in_colab_is_false_here():
    assert utils.in_colab() is False


def test_rounded_handles_nested_structures_and_negative_zero():
    value = {"t": torch.tensor([[0.12345, -0.0001]]), "a": np.array([1.23456]), "l": (2, 2.5555), "f": np.float32(0.5)}
    assert utils.rounded(value, 2) == {"t": [[0.12, 0.0]], "a": [1.23], "l": (2, 2.56), "f": 0.5}
    assert str(utils.rounded(-0.0001, 3)) == "0.0"
    with pytest.raises(TypeError, match="value must be"):
        utils.rounded("text")


def test_fmt_uses_significant_digits():
    assert utils.fmt(0.012345) == "0.0123"
    assert utils.fmt(torch.tensor(12345.0), sig=2) == "1.2e+04"
    assert utils.fmt(-0.0) == "0"
    with pytest.raises(ValueError, match="single number.*\\(2,\\)"):
        utils.fmt(torch.zeros(2))
    with pytest.raises(ValueError, match="sig"):
        utils.fmt(1.0, sig=0)


def test_shapes_table_aligns_names():
    table = utils.shapes(q=torch.zeros(2, 5, 8), keys=torch.zeros(2, 7, 8), mask=(2, 1, 7))
    assert table.splitlines() == ["q     (2, 5, 8)", "keys  (2, 7, 8)", "mask  (2, 1, 7)"]


def _run_with_shift(shift: str, code: str) -> str:
    import subprocess
    import sys

    env = {**os.environ, "MTLIB_SEED_SHIFT": shift}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    return out.stdout.strip() + out.stderr.strip()[-300:]


_DRAWS = (
    "import random, numpy as np, torch; from mtlib import utils; utils.setup(seed=3, style=False);"
    "a = torch.rand(2).tolist(); b = np.random.rand(); c = random.random();"
    "torch.manual_seed(7); d = torch.rand(1).item();"
    "e = torch.rand(1, generator=torch.Generator().manual_seed(11)).item();"
    "np.random.seed(5); f = np.random.rand(); random.seed(9); g = random.random();"
    "print(repr((a, b, c, d, e, f, g)))"
)


def test_seed_shift_moves_every_seed_the_chapter_and_mtlib_set():
    shifted = _run_with_shift("1000", _DRAWS)
    plain = _run_with_shift("0", _DRAWS)
    torch.manual_seed(1003)
    a = torch.rand(2).tolist()
    np.random.seed(1003)
    b = np.random.rand()
    random.seed(1003)
    c = random.random()
    torch.manual_seed(1007)
    d = torch.rand(1).item()
    e = torch.rand(1, generator=torch.Generator().manual_seed(1011)).item()
    np.random.seed(1005)
    f = np.random.rand()
    random.seed(1009)
    g = random.random()
    assert shifted == repr((a, b, c, d, e, f, g))
    assert plain != shifted
    torch.manual_seed(3)
    assert eval(plain)[0] == torch.rand(2).tolist()  # no shift: the seeds as written


def test_unshifted_keeps_the_seeds_as_written_inside_and_shifts_again_after():
    code = "\n".join([
        "import random, numpy as np, torch",
        "from mtlib import utils",
        "utils.setup(seed=3, style=False)",
        "torch.manual_seed(7); before = torch.rand(1).item()",
        "with utils.unshifted():",
        "    torch.manual_seed(7); a = torch.rand(1).item()",
        "    e = torch.rand(1, generator=torch.Generator().manual_seed(11)).item()",
        "    np.random.seed(5); f = np.random.rand(); random.seed(9); g = random.random()",
        "torch.manual_seed(7); after = torch.rand(1).item()",
        "fixed = torch.rand(1, generator=utils.fixed_generator(11)).item()",
        "print(repr((before, a, e, f, g, after, fixed)))",
    ])
    before, a, e, f, g, after, fixed = eval(_run_with_shift("1000", code))
    assert fixed == e  # fixed_generator: seed 11 as written, outside the block too
    torch.manual_seed(7)
    assert a == torch.rand(1).item()  # seed 7 as written
    assert e == torch.rand(1, generator=torch.Generator().manual_seed(11)).item()
    np.random.seed(5)
    assert f == np.random.rand()
    random.seed(9)
    assert g == random.random()
    torch.manual_seed(1007)
    assert before == after == torch.rand(1).item()  # shifted before and after the block
    with utils.unshifted():  # no shift installed: nothing changes
        torch.manual_seed(7)
        assert a == torch.rand(1).item()


def test_seed_shift_must_be_a_non_negative_integer(monkeypatch):
    monkeypatch.setenv("MTLIB_SEED_SHIFT", "-3")
    with pytest.raises(ValueError, match="MTLIB_SEED_SHIFT must be an integer >= 0"):
        utils.seed_shift()
    monkeypatch.setenv("MTLIB_SEED_SHIFT", "")
    assert utils.seed_shift() == 0


def test_below_prints_the_bound_and_never_a_false_one():
    assert utils.below(1.1e-07, 1e-6) == "< 1e-6"
    assert utils.below(torch.tensor(3e-9), 1e-8) == "< 1e-8"
    assert utils.below(0.004, 0.01) == "< 0.01"
    assert utils.below(2.5e-6, 1e-6) == "2.5e-06 (not below 1e-6)"
    assert utils.below(float("nan"), 1e-6).startswith("nan")
    with pytest.raises(ValueError, match="bound must be a positive number"):
        utils.below(1e-7, 0)
    with pytest.raises(ValueError, match="single number"):
        utils.below(torch.zeros(2), 1e-6)
