"""The self-check pattern: correct solutions pass, every kind of mistake gets a readable message."""

import pytest
import torch

from mtlib import exercises


def good_softmax(x, temperature=1.0):
    z = x / temperature
    z = z - z.max(dim=-1, keepdim=True).values
    return z.exp() / z.exp().sum(dim=-1, keepdim=True)


def good_lookup(queries, keys, values, key_mask):
    scores = (queries @ keys.transpose(-2, -1)).masked_fill(~key_mask[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


def good_laplace(x_query, x_train, y_train, bandwidth):
    scores = -(x_query[:, None] - x_train[None, :]).abs() / bandwidth
    return scores.softmax(dim=-1) @ y_train


def naive_laplace(x_query, x_train, y_train, bandwidth):
    weights = (-(x_query[:, None] - x_train[None, :]).abs() / bandwidth).exp()
    return weights @ y_train / weights.sum(-1)


@pytest.mark.parametrize(
    "checker, solution, cases",
    [
        (exercises.check_softmax, good_softmax, 8),
        (exercises.check_soft_lookup, good_lookup, 4),
        (exercises.check_laplace_regression, good_laplace, 4),
    ],
)
def test_correct_solutions_pass_and_say_so(checker, solution, cases, capsys):
    assert checker(solution) is None
    assert capsys.readouterr().out.strip() == f"{checker.__name__}: all {cases} cases passed."


def naive_softmax(x, temperature=1.0):
    return (x / temperature).exp() / (x / temperature).exp().sum(-1, keepdim=True)


def global_max_softmax(x, temperature=1.0):
    z = x / temperature
    z = z - z.max()  # one maximum for the whole tensor: a row far below it underflows to 0/0
    return z.exp() / z.exp().sum(-1, keepdim=True)


def in_place_softmax(x, temperature=1.0):
    x -= x.max(dim=-1, keepdim=True).values
    return good_softmax(x, temperature)


@pytest.mark.parametrize(
    "checker, bad, match",
    [
        # the learner's function raises: reported in words, no traceback from inside the checker
        (exercises.check_softmax, lambda x, temperature=1.0: 1 / 0, r"case 1 of 8 .*raised ZeroDivisionError: division by zero"),
        # wrong type
        (exercises.check_softmax, lambda x, temperature=1.0: x.tolist(), r"case 1 of 8 .*expected a torch.Tensor, got list"),
        # wrong shape: softmax over the wrong dimension keeps the shape, summing does not
        (exercises.check_softmax, lambda x, temperature=1.0: x.exp().sum(-1), r"case 1 of 8 .*expected output shape \(4,\), got \(\)"),
        # the batched, padded lookup (exercise 2)
        (exercises.check_soft_lookup, lambda q, k, v, m: None, r"expected a torch.Tensor, got NoneType"),
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax(q[0] @ k[0].T, -1) @ v[0], r"case 1 of 4 .*expected output shape \(1, 1, 2\), got \(1, 2\)"),
        # a missing transpose: no case has square keys, so queries @ keys cannot pass
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax(q @ k, -1) @ v, r"case 1 of 4 .*raised RuntimeError"),
        # wrong normalisation axis: with m=1 every weight becomes 1
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(~m[:, None], -1e9), 1) @ v, r"case 1 of 4 .*\nHint: .*normalise over the keys"),
        # the mask: ignored, inverted, broadcast over the wrong axis, zeroed after the softmax, filled with 0
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax(q @ k.mT, -1) @ v, r"case 1 of 4 .*known mistake.*\nHint: the padded keys still get weight"),
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(m[:, None], -1e9), -1) @ v, r"case 1 of 4 .*\nHint: key_mask is True for the keys that exist"),
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(~m[None], -1e9), -1) @ v, r"case 2 of 4 \(B=3 .*B == m.*known mistake.*\nHint: the mask belongs to the keys"),
        (exercises.check_soft_lookup, lambda q, k, v, m: (torch.softmax(q @ k.mT, -1) * m[:, None]) @ v, r"case 1 of 4 .*\nHint: zeroing the padded keys' weights after the softmax"),
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(~m[:, None], 0), -1) @ v, r"case 1 of 4 .*\nHint: a score of 0 is not a weight of 0"),
        # the score scaled as in chapter 3
        (exercises.check_soft_lookup, lambda q, k, v, m: torch.softmax((q @ k.mT / q.shape[-1] ** 0.5).masked_fill(~m[:, None], -1e9), -1) @ v, r"case 1 of 4 .*\nHint: the score is the plain dot product"),
        # softmax: a fixed dim=1 (wrong on 3-D input), a power of the softmax at low temperature
        (exercises.check_softmax, lambda x, temperature=1.0: torch.softmax(x / temperature, dim=1) if x.dim() > 1 else torch.softmax(x / temperature, 0), r"case 7 of 8 \(a batch of 2 score matrices.*largest error"),
        (exercises.check_softmax, lambda x, temperature=1.0: (lambda p: p / p.sum(-1, keepdim=True))(torch.softmax(x, -1) ** (1 / temperature)), r"case 8 of 8 \(temperature=0.01.*NaN or inf.*\nHint: divide the scores by the temperature before"),
        # the Gaussian kernel where the Laplace kernel was asked for
        (exercises.check_laplace_regression, lambda q, x, y, h: torch.softmax(-((q[:, None] - x) ** 2) / h, -1) @ y, r"case 1 of 4 .*\nHint: .*uses \|u\|"),
        # the Gaussian's temperature 2 sigma^2 carried over to the Laplace kernel (case 1's
        # bandwidth 0.4 is not 2 * 0.4**2, so this fails on the first case)
        (exercises.check_laplace_regression, lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() / (2 * h**2), -1) @ y, r"case 1 of 4 .*largest error"),
        # wrong values: softmax over dim 0 is right for one row and wrong for the 3-row case
        (exercises.check_softmax, lambda x, temperature=1.0: torch.softmax(x, dim=0), r"case 2 of 8 \(3 rows.*largest error .* at index \(\d, \d\)"),
        (exercises.check_softmax, lambda x, temperature=1.0: torch.softmax(x, dim=-1), r"case 3 of 8 \(temperature=0.5.*\nHint: divide the scores by the temperature"),
        # numerics: overflow and underflow
        (exercises.check_softmax, naive_softmax, r"case 5 of 8 \(large scores.*NaN or inf.*\nHint: exp\(1000\) overflows"),
        (exercises.check_softmax, global_max_softmax, r"case 6 of 8 \(two rows 1000 apart.*NaN or inf.*\nHint: subtract each row's own maximum"),
        (exercises.check_laplace_regression, naive_laplace, r"case 4 of 4 \(m=1 query far.*NaN or inf.*\nHint: .*softmax"),
        # integer output, in-place modification
        (exercises.check_softmax, lambda x, temperature=1.0: torch.zeros(x.shape, dtype=torch.long), r"floating-point tensor, got dtype torch.int64"),
        (exercises.check_softmax, in_place_softmax, r"changed its input tensor in place"),
    ],
)
def test_mistakes_get_a_diagnostic_naming_the_case(checker, bad, match):
    with pytest.raises(AssertionError, match=match) as info:
        checker(bad)
    error = info.value
    assert isinstance(error, exercises.CheckFailed)
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)  # no inner traceback
    assert "good_" not in str(info.value) and "def " not in str(info.value)  # never shows a solution


def test_every_soft_lookup_case_would_expose_a_missing_transpose():
    """Square or symmetric keys let ``queries @ keys`` (no ``.T``) pass; the cases must have neither."""
    calls = []

    def spy(queries, keys, values, key_mask):
        calls.append((queries.shape, keys.shape))
        return good_lookup(queries, keys, values, key_mask)

    exercises.check_soft_lookup(spy)
    for (b, m, d), (b_keys, n, d_keys) in calls:
        assert b == b_keys and d == d_keys and n != d and m != n, f"a case with queries ({b}, {m}, {d}) and keys ({b_keys}, {n}, {d_keys})"
    assert any(b == m for (b, m, _), _ in calls), "no case has B == m, where a mask on the wrong axis broadcasts"


def test_a_non_function_is_a_type_error():
    with pytest.raises(TypeError, match="check_softmax takes your function, got list"):
        exercises.check_softmax([1, 2, 3])


def test_jupyter_shows_only_the_message():
    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_softmax(lambda x, temperature=1.0: 1 / 0)
    lines = info.value._render_traceback_()
    assert lines == [f"CheckFailed: {info.value}"]
    assert "exercises.py" not in "".join(lines)
