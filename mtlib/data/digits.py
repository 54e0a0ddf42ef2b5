"""scikit-learn's bundled handwritten digits (8 x 8, grey), split and normalised (chapter 11).

The 1,797 images ship inside scikit-learn (``sklearn.datasets.load_digits``), so nothing is
downloaded. :func:`digits_split` makes a fixed, stratified train/test split (the same 20% of
every class held out whatever the seed of a training run) and normalises the pixels with the
training set's mean and standard deviation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mtlib import utils

__all__ = ["DigitsSplit", "digits_split", "load_digit_images"]


@dataclass
class DigitsSplit:
    """A train/test split of the digits, normalised.

    Attributes:
        x_train: (N_train, 1, 8, 8) float images, ``(pixel / 16 - mean) / std``.
        y_train: (N_train,) long labels 0-9.
        x_test: (N_test, 1, 8, 8) float images, normalised like ``x_train``.
        y_test: (N_test,) long labels.
        mean: training-set mean of ``pixel / 16``.
        std: training-set standard deviation of ``pixel / 16``.
    """

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    mean: float
    std: float

    @property
    def background(self) -> float:
        """The value of a blank (0) pixel after normalisation."""
        return -self.mean / self.std

    def subset(self, n: int, *, seed: int = 0) -> DigitsSplit:
        """The same split with only ``n`` training images, stratified (about n / 10 per class).

        The normalisation and the test set are unchanged, so accuracies are comparable.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 10 <= n <= len(self.y_train):
            raise ValueError(f"n must be an int in [10, {len(self.y_train)}], got {n!r}")
        keep = _stratified_order(self.y_train, seed)[:n]
        return DigitsSplit(
            self.x_train[keep], self.y_train[keep], self.x_test, self.y_test, self.mean, self.std
        )


def load_digit_images() -> tuple[Tensor, Tensor]:
    """All 1,797 digits as (1797, 1, 8, 8) float pixels in [0, 16] and (1797,) long labels."""
    try:
        from sklearn.datasets import load_digits  # type: ignore[import-untyped]  # no stubs
    except ImportError as error:  # scikit-learn is in requirements.txt, not a dependency of mtlib
        raise ImportError("the digits ship with scikit-learn: pip install scikit-learn") from error
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32)[:, None]  # (1797, 1, 8, 8)
    return images, torch.tensor(digits.target, dtype=torch.long)


def _stratified_order(labels: Tensor, seed: int) -> Tensor:
    """Indices in an order that cycles through the classes: any prefix is about balanced."""
    g = utils.fixed_generator(seed)  # the same split under the seed sweep too
    per_class = [
        (labels == c).nonzero().flatten()[torch.randperm(int((labels == c).sum()), generator=g)]
        for c in range(int(labels.max()) + 1)
    ]
    rank = torch.empty(len(labels))
    for idx in per_class:  # the k-th image of each class gets rank k (+ a tie-break by class)
        rank[idx] = torch.arange(len(idx), dtype=torch.float32) / len(idx)
    return torch.argsort(rank + 1e-6 * labels.float(), stable=True)


def digits_split(*, test_fraction: float = 0.2, seed: int = 0) -> DigitsSplit:
    """A stratified train/test split of the digits, normalised by the training set.

    Args:
        test_fraction: share of every class held out for testing, in (0, 1).
        seed: the split's seed (the book uses 0 throughout).

    Returns:
        A :class:`DigitsSplit`; with the defaults, 1,438 training and 359 test images.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    images, labels = load_digit_images()
    images = images / 16.0
    g = utils.fixed_generator(seed)  # the same split under the seed sweep too
    test = torch.zeros(len(labels), dtype=torch.bool)
    for c in range(10):
        idx = (labels == c).nonzero().flatten()
        chosen = idx[torch.randperm(len(idx), generator=g)[: round(test_fraction * len(idx))]]
        test[chosen] = True
    x_train, x_test = images[~test], images[test]
    mean, std = x_train.mean().item(), x_train.std().item()
    return DigitsSplit(
        (x_train - mean) / std, labels[~test], (x_test - mean) / std, labels[test], mean, std
    )
