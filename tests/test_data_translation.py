"""The numbers-to-words task: correct words, a clean held-out split, reproducible batches."""

import pytest
import torch

from mtlib.data import BOS, EOS, PAD
from mtlib.data.translation import (
    MAX_TGT_LEN,
    SRC_TOKENS,
    TGT_TOKENS,
    WORDS,
    decode_words,
    encode_numbers,
    is_heldout,
    number_batch,
    number_to_words,
)


@pytest.mark.parametrize(
    "n, words",
    [
        (0, "zero"),
        (7, "seven"),
        (10, "ten"),
        (19, "nineteen"),
        (20, "twenty"),
        (40, "forty"),
        (99, "ninety nine"),
        (100, "one hundred"),
        (101, "one hundred one"),
        (110, "one hundred ten"),
        (1000, "one thousand"),
        (1001, "one thousand one"),
        (10_000, "ten thousand"),
        (40_519, "forty thousand five hundred nineteen"),
        (100_010, "one hundred thousand ten"),
        (613_047, "six hundred thirteen thousand forty seven"),
        (999_999, "nine hundred ninety nine thousand nine hundred ninety nine"),
    ],
)
def test_number_to_words(n, words):
    assert " ".join(number_to_words(n)) == words


@pytest.mark.parametrize("bad", [-1, 1_000_000, 3.0, True, "12"])
def test_number_to_words_refuses_bad_input(bad):
    with pytest.raises(ValueError, match="n must be an int in"):
        number_to_words(bad)


def test_vectorised_encoding_matches_the_reference():
    numbers = torch.cat([torch.arange(20_000), torch.arange(20_000, 1_000_000, 7), torch.tensor([777_777, 999_999])])
    batch = encode_numbers(numbers)
    assert batch.tgt.shape == (len(numbers), MAX_TGT_LEN) and batch.src.shape == (len(numbers), 6)
    for i in list(range(0, 2000)) + list(range(2000, len(numbers), 97)) + [len(numbers) - 2, len(numbers) - 1]:
        n = int(numbers[i])
        assert decode_words(batch.tgt[i]) == " ".join(number_to_words(n)), n
        digits = batch.src[i][batch.src[i] != PAD]
        assert "".join(SRC_TOKENS[t] for t in digits.tolist()) == str(n)
    lengths = (batch.tgt != PAD).sum(1)  # BOS + words + EOS
    assert (batch.tgt[:, 0] == BOS).all()
    assert (batch.tgt[torch.arange(len(numbers)), lengths - 1] == EOS).all()
    assert int(lengths.max()) == MAX_TGT_LEN  # 777,777 and its kind: 9 words
    assert len(TGT_TOKENS) == 33 and len(WORDS) == 30 and len(SRC_TOKENS) == 13


def test_heldout_split_is_a_tenth_from_100_and_new_combinations():
    numbers = torch.arange(1_000_000)
    held = is_heldout(numbers)
    assert not held[:100].any()  # the dictionary stays in training
    for digits in range(3, 7):
        share = held[10 ** (digits - 1) : 10**digits].float().mean().item()
        assert 0.09 < share < 0.11, (digits, share)
    high, low = numbers // 1000, numbers % 1000
    train_high = torch.zeros(1000, dtype=torch.bool)
    train_low = torch.zeros(1000, dtype=torch.bool)
    train_high[high[~held & (numbers >= 1000)]] = True
    train_low[low[~held & (numbers >= 1000)]] = True
    six = held & (numbers >= 100_000)
    # every block of a held-out 6-digit number occurs in training, in the same position
    assert train_high[high[six]].all() and train_low[low[six]].all()


def test_batches_respect_the_split_and_the_lengths():
    generator = torch.Generator().manual_seed(0)
    train = number_batch(4000, generator=generator)
    held = number_batch(1000, split="heldout", generator=generator)
    assert not is_heldout(train.numbers).any() and is_heldout(held.numbers).all()
    digits = torch.tensor([len(str(int(n))) for n in train.numbers])
    assert set(digits.tolist()) == {1, 2, 3, 4, 5, 6}
    assert (digits.bincount()[1:] > 500).all()  # about uniform over lengths
    assert int(held.numbers.min()) >= 100
    short = number_batch(50, max_digits=2, generator=generator)
    assert int(short.numbers.max()) < 100 and short.src.shape[1] <= 2
    one = number_batch(8, generator=torch.Generator().manual_seed(3))
    again = number_batch(8, generator=torch.Generator().manual_seed(3))
    assert torch.equal(one.src, again.src) and torch.equal(one.tgt, again.tgt)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 0}, "n must be a positive int"),
        ({"n": 4, "split": "test"}, "split must be 'train' or 'heldout'"),
        ({"n": 4, "max_digits": 7}, "max_digits <= 6"),
        ({"n": 4, "split": "heldout", "min_digits": 2}, "3 <= min_digits for the held-out"),
    ],
)
def test_number_batch_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        number_batch(**kwargs)


def test_encode_and_decode_refuse_bad_input():
    with pytest.raises(ValueError, match="numbers must lie in"):
        encode_numbers(torch.tensor([5, 1_000_000]))
    with pytest.raises(ValueError, match="1-D integer tensor"):
        encode_numbers(torch.tensor([[5]]))
    with pytest.raises(TypeError, match="integer tensor"):
        is_heldout(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="1-D tensor"):
        decode_words(torch.tensor([[1, 2]]))
    assert decode_words(torch.tensor([BOS, 3 + 5, EOS, 3 + 7])) == "five"
