"""Self-check functions for the exercises.

Each checker takes *your* function, runs it on several small cases and compares the result
with a reference. When a case fails it raises ``CheckFailed`` (an ``AssertionError``) with a diagnostic that says
which case failed and how (wrong type, wrong shape, NaN, wrong values and where), plus a hint;
it never prints the solution. When every case passes it prints one line saying so.

Example:
    >>> from mtlib import exercises
    >>> def my_softmax(x, temperature=1.0):
    ...     ...  # your code
    >>> exercises.check_softmax(my_softmax)
    check_softmax: all 5 cases passed.

One module per chapter (``ch01.py``, ``ch02.py``, ...); every checker is importable from here.
"""

from mtlib.exercises._core import CheckFailed
from mtlib.exercises.ch01 import check_laplace_regression, check_soft_lookup, check_softmax
from mtlib.exercises.ch02 import check_apply_merges, check_longest_match, check_tied_logits
from mtlib.exercises.ch03 import check_attention_entropy, check_scaled_dot_product_attention, check_self_attention_layer

__all__ = [
    "CheckFailed",
    "check_apply_merges",
    "check_longest_match",
    "check_tied_logits",
    "check_attention_entropy",
    "check_scaled_dot_product_attention",
    "check_self_attention_layer",
    "check_laplace_regression",
    "check_soft_lookup",
    "check_softmax",
]
