"""The checker machinery shared by every chapter (mtlib/exercises/_core.py)."""

import pytest
import torch

from mtlib import exercises


def _softmax_with_a_shape_bug(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    scaled = x / temperature
    return scaled @ torch.ones(3, 3)  # the learner's bug: a matmul of the wrong size


def test_when_the_learners_code_raises_the_message_shows_the_learners_line() -> None:
    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_softmax(_softmax_with_a_shape_bug)
    message = str(info.value)
    assert "your function raised RuntimeError" in message
    assert "in your code, line" in message and "return scaled @ torch.ones(3, 3)" in message
    assert "/" not in message.split("in your code")[1].split(":")[0]  # no file path leaks


def test_an_error_inside_torch_points_at_the_learners_call_not_torch() -> None:
    def bad(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        return torch.softmax(x, dim=5)  # IndexError raised inside torch

    with pytest.raises(exercises.CheckFailed, match=r"line \d+: return torch.softmax\(x, dim=5\)"):
        exercises.check_softmax(bad)
