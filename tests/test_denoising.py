"""The pretraining objectives of chapter 14: exact counts, invertibility, statistics over draws."""

import itertools
import math

import pytest
import torch

from mtlib import denoising as dn

SENTINELS = list(range(999, 949, -1))  # 50 sentinels, numbered down like T5's <extra_id_k>


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---- T5: span corruption ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "length, density, mean", [(37, 0.15, 3.0), (101, 0.15, 3.0), (64, 0.3, 2.0), (2, 0.5, 3.0)]
)
def test_noise_mask_has_exact_counts_and_alternates(length, density, mean):
    for seed in range(20):
        noise = dn.random_spans_noise_mask(
            length, noise_density=density, mean_span_length=mean, generator=gen(seed)
        )
        assert noise.shape == (length,) and noise.dtype == torch.bool
        num_noise = min(max(round(length * density), 1), length - 1)
        assert int(noise.sum()) == num_noise
        starts = noise & ~torch.cat([torch.tensor([False]), noise[:-1]])
        assert int(starts.sum()) == max(round(num_noise / mean), 1)
        assert not noise[0]  # kept tokens first, as in T5's code


def test_noise_spans_have_the_requested_mean_length_over_draws():
    lengths = []
    for seed in range(300):
        noise = dn.random_spans_noise_mask(
            200, noise_density=0.15, mean_span_length=3.0, generator=gen(seed)
        )
        edges = torch.diff(noise.long(), prepend=torch.tensor([0]), append=torch.tensor([0]))
        starts, ends = (edges == 1).nonzero().flatten(), (edges == -1).nonzero().flatten()
        lengths += (ends - starts).tolist()
    assert abs(sum(lengths) / len(lengths) - 3.0) < 0.05  # 30 noise tokens in 10 spans: exactly 3
    assert min(lengths) >= 1 and max(lengths) > 5  # lengths vary around the mean
    # every position is noise about equally often apart from the first, which never is
    counts = torch.zeros(200)
    for seed in range(300):
        counts += dn.random_spans_noise_mask(200, generator=gen(seed)).float()
    assert counts[0] == 0 and 0.10 < counts[50:150].mean() / 300 < 0.20


def test_span_corruption_is_invertible_and_uses_sentinels_in_order():
    tokens = torch.arange(10, 87)  # 77 tokens
    for seed in range(25):
        inputs, targets = dn.span_corruption(
            tokens, sentinel_ids=SENTINELS, eos_id=1, generator=gen(seed)
        )
        assert inputs[-1] == 1 and targets[-1] == 1
        n_spans = int(torch.isin(inputs, torch.tensor(SENTINELS)).sum())
        assert (
            inputs.numel() - 1 == 77 - 12 + n_spans and targets.numel() - 1 == 12 + n_spans
        )  # round(11.55)
        assert targets[0] == SENTINELS[0]
        used = [t for t in inputs.tolist() if t in SENTINELS]
        assert used == SENTINELS[:n_spans] == [t for t in targets.tolist() if t in SENTINELS]
        back = dn.span_corruption_inverse(inputs, targets, sentinel_ids=SENTINELS, eos_id=1)
        assert torch.equal(back, tokens)


def test_span_corruption_paper_example_shape():
    tokens = torch.tensor(
        [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    )  # "Thank you for inviting me to your party last week"
    inputs, targets = dn.span_corruption(tokens, noise_density=0.3, mean_span_length=1.5, sentinel_ids=[99, 98],
                                         generator=gen(3))  # fmt: skip
    assert int(torch.isin(inputs, torch.tensor([99, 98])).sum()) == 2  # two spans, <X> and <Y>
    assert targets.numel() == 3 + 2 and inputs.numel() == 10 - 3 + 2


def test_span_corruption_bad_arguments_are_named():
    tokens = torch.arange(10, 30)
    with pytest.raises(ValueError, match="noise_density"):
        dn.span_corruption(tokens, noise_density=1.5, sentinel_ids=SENTINELS)
    with pytest.raises(ValueError, match="mean_span_length"):
        dn.span_corruption(tokens, mean_span_length=0.5, sentinel_ids=SENTINELS)
    with pytest.raises(ValueError, match="sentinel_ids has 0"):
        dn.span_corruption(tokens, sentinel_ids=[])
    with pytest.raises(ValueError, match="distinct"):
        dn.span_corruption(tokens, sentinel_ids=[99, 99])
    with pytest.raises(ValueError, match="already contain"):
        dn.span_corruption(tokens, sentinel_ids=[12])
    with pytest.raises(ValueError, match="1-D"):
        dn.span_corruption(tokens[None], sentinel_ids=SENTINELS)
    with pytest.raises(TypeError, match="integer"):
        dn.span_corruption(tokens.float(), sentinel_ids=SENTINELS)
    with pytest.raises(TypeError, match="generator"):
        dn.span_corruption(tokens, sentinel_ids=SENTINELS, generator=0)
    with pytest.raises(ValueError, match="length"):
        dn.random_spans_noise_mask(1)


def test_seeded_generator_makes_draws_reproducible():
    tokens = torch.arange(10, 60)
    a = dn.span_corruption(tokens, sentinel_ids=SENTINELS, generator=gen(7))
    b = dn.span_corruption(tokens, sentinel_ids=SENTINELS, generator=gen(7))
    c = dn.span_corruption(tokens, sentinel_ids=SENTINELS, generator=gen(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[0], c[0])


# ---- BART ------------------------------------------------------------------------------------


def test_token_masking_masks_an_exact_count_uniformly():
    tokens = torch.arange(10, 50)  # 40 tokens
    hits = torch.zeros(40)
    for seed in range(400):
        out = dn.token_masking(tokens, mask_id=3, p=0.15, generator=gen(seed))
        masked = out == 3
        assert int(masked.sum()) == 6 and torch.equal(out[~masked], tokens[~masked])
        hits += masked.float()
    assert ((hits / 400 - 0.15).abs() < 0.07).all()  # each position about 15% of the time


def test_token_deletion_keeps_order_and_count():
    tokens = torch.arange(10, 43)  # 33 tokens
    for seed in range(30):
        out = dn.token_deletion(tokens, p=0.2, generator=gen(seed))
        assert out.numel() == 33 - round(6.6) and bool(
            (out.diff() > 0).all()
        )  # a sorted subsequence
        assert bool(torch.isin(out, tokens).all())


def test_poisson_span_lengths_statistics():
    lengths = torch.cat([dn.poisson_span_lengths(1000, generator=gen(s))[:-1] for s in range(20)])
    assert abs(lengths.float().mean().item() - 3.0) < 0.1
    assert (
        abs((lengths == 0).float().mean().item() - math.exp(-3)) < 0.015
    )  # zero-length spans exist
    for s in range(10):
        assert int(dn.poisson_span_lengths(17, generator=gen(s)).sum()) == 17
    assert dn.poisson_span_lengths(0).numel() == 0


def test_text_infilling_hides_an_exact_count_with_one_mask_per_span():
    tokens = torch.arange(10, 60)  # 50 tokens, 15 hidden at p = 0.3
    zero_length_seen = False
    n_masks = []
    for seed in range(200):
        out = dn.text_infilling(tokens, mask_id=3, p=0.3, generator=gen(seed))
        kept = out[out != 3]
        assert (
            kept.numel() == 35
            and bool((kept.diff() > 0).all())
            and bool(torch.isin(kept, tokens).all())
        )
        is_mask = (out == 3).long()
        assert not bool((is_mask[1:] & is_mask[:-1]).any())  # never two masks side by side
        # a zero-length span: a mask between two tokens that were neighbours in the original
        idx = (out == 3).nonzero().flatten().tolist()
        for i in idx:
            if 0 < i < out.numel() - 1 and out[i + 1] - out[i - 1] == 1:
                zero_length_seen = True
        n_masks.append(len(idx))
    assert zero_length_seen
    assert 4.0 < sum(n_masks) / len(n_masks) < 6.5  # about 15 / 3 spans (the last is cut)


def test_sentence_permutation_is_a_permutation_of_sentences():
    tokens = torch.tensor(
        [4, 5, 0, 6, 0, 7, 8, 9, 0, 10]
    )  # three sentences ending with 0, and a tail
    sentences = [(4, 5, 0), (6, 0), (7, 8, 9, 0), (10,)]
    allowed = {sum((sentences[i] for i in order), ()) for order in itertools.permutations(range(4))}
    orders: dict[tuple[int, ...], int] = {}
    for seed in range(480):
        out = tuple(dn.sentence_permutation(tokens, sep_id=0, generator=gen(seed)).tolist())
        assert out in allowed  # whole sentences, each in its own order
        orders[out] = orders.get(out, 0) + 1
    assert len(orders) == 24  # all 4! orders occur
    assert max(orders.values()) / 480 < 1 / 24 + 0.04  # about uniformly


def test_bart_bad_arguments_are_named():
    tokens = torch.arange(10, 30)
    with pytest.raises(ValueError, match="mask_id"):
        dn.token_masking(tokens, mask_id=-1)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        dn.token_deletion(tokens, p=1.0)
    with pytest.raises(ValueError, match="poisson_lambda"):
        dn.text_infilling(tokens, mask_id=3, poisson_lambda=0)
    with pytest.raises(ValueError, match="already contain mask_id"):
        dn.text_infilling(tokens, mask_id=12)
    with pytest.raises(ValueError, match="sep_id"):
        dn.sentence_permutation(tokens, sep_id=None)
    with pytest.raises(TypeError, match="tokens must be"):
        dn.token_deletion([1, 2, 3])
    assert torch.equal(dn.token_masking(tokens, mask_id=3, p=0.0), tokens)


def test_noise_always_ends_the_sequence_unless_rolled():
    ends, ends_rolled, starts_rolled = 0, 0, 0
    for seed in range(400):
        plain = dn.random_spans_noise_mask(60, generator=gen(seed))
        rolled = dn.random_spans_noise_mask(60, random_roll=True, generator=gen(seed))
        assert int(rolled.sum()) == 9  # the same count of noise tokens
        ends += int(plain[-1])
        ends_rolled += int(rolled[-1])
        starts_rolled += int(rolled[0])
    assert ends == 400  # T5's code (random_roll=False): the last piece is always noise
    assert (
        0.08 < ends_rolled / 400 < 0.24 and starts_rolled > 0
    )  # rolled: about 15%, and wrapped spans
    tokens = torch.arange(10, 70)
    inputs, targets = dn.span_corruption(
        tokens, sentinel_ids=SENTINELS, random_roll=True, generator=gen(1)
    )
    assert torch.equal(dn.span_corruption_inverse(inputs, targets, sentinel_ids=SENTINELS), tokens)
