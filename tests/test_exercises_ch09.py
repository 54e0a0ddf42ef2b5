"""Chapter 9's self-checks: correct answers pass, typical mistakes are named."""

import pytest
import torch
import torch.nn.functional as F

from mtlib.exercises import CheckFailed
from mtlib.exercises.ch09 import (
    check_distillation_loss,
    check_masked_mean_pool,
    check_mlm_masking,
)
from mtlib.models.bert import mask_tokens

# --- 1. the 80/10/10 rule -------------------------------------------------------------------


def masking(
    ids,
    *,
    mask_id,
    vocab_size,
    special_ids,
    generator,
    rates=(0.15, 0.8, 0.9),
    labels_everywhere=False,
    choose_specials=False,
    random_any=False,
    specials_first=False,
    mask_as_random=False,
    no_generator=False,
    labels_at_mask_only=False,
    inverted_labels=False,
):
    if no_generator:
        generator = None
    never = list(special_ids) + [mask_id]
    special = torch.isin(ids, torch.tensor(never))
    chosen = torch.rand(ids.shape, generator=generator) < rates[0]
    if not choose_specials:
        chosen &= ~special
    u = torch.rand(ids.shape, generator=generator)
    if random_any:
        allowed = torch.arange(vocab_size)
    elif specials_first:  # assumes the specials are ids 0-3
        allowed = torch.arange(len(never), vocab_size)
    else:
        allowed = torch.tensor(
            [i for i in range(vocab_size) if i not in never or (mask_as_random and i == mask_id)]
        )
    random_ids = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
    inputs = torch.where(chosen & (u < rates[1]), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (u >= rates[1]) & (u < rates[2]), random_ids, inputs)
    target = chosen & (u < rates[1]) if labels_at_mask_only else chosen
    if inverted_labels:
        target = ~chosen
    labels = (
        ids.clone() if labels_everywhere else torch.where(target, ids, torch.full_like(ids, -100))
    )
    return inputs, labels


def test_mlm_masking_accepts_correct_answers(capsys):
    check_mlm_masking(masking)
    check_mlm_masking(mask_tokens)  # mtlib's own, a different way to draw
    assert "within tolerance" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(rates=(0.15, 1.0, 1.0)), "only 80% become \\[MASK\\]"),
        (dict(labels_everywhere=True), "no -100"),
        (dict(choose_specials=True), "special token"),
        (dict(rates=(0.15 * 0.8, 1.0, 1.0)), "expected 15%"),
        (dict(rates=(0.15, 0.7, 0.9)), "expected about 80%, 10%, 10%"),
        (dict(random_any=True), "random replacement is a special id"),
        (
            dict(specials_first=True),
            "(?s)specials \\[PAD\\]=2 .*random replacement is a special id.*LAST",
        ),
        (dict(mask_as_random=True), "a random replacement can be \\[MASK\\]"),
        (dict(no_generator=True), "pass generator= to every random call"),
        (dict(labels_at_mask_only=True), "kept tokens are chosen tokens too"),
        (dict(inverted_labels=True), "labels are inverted"),
    ],
)
def test_mlm_masking_names_typical_mistakes(kwargs, message):
    def wrong(ids, **kw):
        return masking(ids, **kw, **kwargs)

    with pytest.raises(CheckFailed, match=message):
        check_mlm_masking(wrong)


def test_mlm_masking_rejects_labels_from_the_corrupted_inputs():
    def wrong(ids, **kw):
        inputs, labels = masking(ids, **kw)
        return inputs, torch.where(labels != -100, inputs, labels)

    with pytest.raises(CheckFailed, match="ORIGINAL ids"):
        check_mlm_masking(wrong)


# --- 2. mean pooling over the real tokens ---------------------------------------------------


def good_pool_einsum(hidden, mask):
    m = mask.float()
    return torch.einsum("btd,bt->bd", hidden, m) / m.sum(1, keepdim=True).clamp(min=1)


def good_pool_masked_fill(hidden, mask):
    pad = ~mask.bool()[..., None]
    count = (~pad).sum(1).clamp(min=1)
    return hidden.masked_fill(pad, 0).sum(1) / count


def pool_nan(hidden, mask):  # 0 / 0 on a row of padding
    m = mask.float()[..., None]
    return (hidden * m).sum(1) / m.sum(1)


def test_masked_mean_pool_accepts_correct_variants(capsys):
    check_masked_mean_pool(good_pool_einsum)
    check_masked_mean_pool(good_pool_masked_fill)
    assert capsys.readouterr().out.count("all 3 cases passed") == 2


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda h, m: h.mean(1), "all T positions"),
        (lambda h, m: (h * m.float()[..., None]).sum(1), "masked SUM"),
        (lambda h, m: (h * m.float()[..., None]).sum(1) / h.shape[1], "divided by T"),
        (lambda h, m: good_pool_einsum(h, 1 - m.float()), "flipped"),
        (pool_nan, "(?s)case 3 of 3.*NaN.*clamp"),
        (lambda h, m: h[:, 0], "case 1 of 3"),
    ],
)
def test_masked_mean_pool_names_typical_mistakes(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_masked_mean_pool(fn)


# --- 3. the distillation loss ---------------------------------------------------------------


def distill(student, teacher, labels, temperature, alpha):
    soft = F.kl_div(F.log_softmax(student / temperature, -1), F.softmax(teacher / temperature, -1),
                    reduction="batchmean")  # fmt: skip
    return alpha * temperature**2 * soft + (1 - alpha) * F.cross_entropy(student, labels)


def test_distillation_loss_accepts_correct_variants():
    check_distillation_loss(distill)

    def by_hand(student, teacher, labels, temperature, alpha):
        p = (teacher / temperature).softmax(-1)
        kl = (p * (p.log() - (student / temperature).log_softmax(-1))).sum(-1).mean()
        hard = -(student.log_softmax(-1).gather(1, labels[:, None])).mean()
        return alpha * temperature * temperature * kl + (1 - alpha) * hard

    check_distillation_loss(by_hand)

    def log_target(student, teacher, labels, temperature, alpha):  # soft CE minus teacher entropy
        log_p = F.log_softmax(teacher / temperature, -1)
        soft = (
            F.cross_entropy(student / temperature, log_p.exp())
            + (log_p.exp() * log_p).sum(-1).mean()
        )
        return alpha * temperature**2 * soft + (1 - alpha) * F.cross_entropy(student, labels)

    check_distillation_loss(log_target)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda s, t, y, T, a: distill(s, t, y, T, a) / 1.0 - a * (T**2 - 1) * F.kl_div(
            F.log_softmax(s / T, -1), F.softmax(t / T, -1), reduction="batchmean"), "tau\\^2"),
        (lambda s, t, y, T, a: a * T**2 * F.kl_div(F.log_softmax(t / T, -1), F.softmax(s / T, -1),
                                                     reduction="batchmean") + (1 - a) * F.cross_entropy(s, y),
         "reversed"),
        (lambda s, t, y, T, a: a * T**2 * F.kl_div(F.log_softmax(s / T, -1), F.softmax(t, -1),
                                                     reduction="batchmean") + (1 - a) * F.cross_entropy(s, y),
         "soften the teacher"),
        (lambda s, t, y, T, a: F.cross_entropy(s, y), "differ"),
        (lambda s, t, y, T, a: a * T**2 * F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1),
                                                     reduction="sum") / s.numel() + (1 - a) * F.cross_entropy(s, y),
         "batchmean"),  # reduction="mean" by hand (torch warns about "mean")
        (lambda s, t, y, T, a: a * T**2 * F.cross_entropy(s / T, F.softmax(t / T, -1))
         + (1 - a) * F.cross_entropy(s, y), "soft cross-entropy"),
        (lambda s, t, y, T, a: distill(s, t, y, T, 1 - a), "(?s)case 2 of 3.*alpha and 1 - alpha are swapped"),
        (lambda s, t, y, T, a: a * T**2 * F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1),
                                                     reduction="batchmean") + (1 - a) * F.cross_entropy(s / T, y),
         "hard loss uses the softened logits"),
        (lambda s, t, y, T, a: a * T**2 * F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1),
                                                     reduction="batchmean") + (1 - a) * F.cross_entropy(s, y),
         "(?s)NaN.*log_target=True"),
        (lambda s, t, y, T, a: a * T * F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1),
                                                 reduction="batchmean") + (1 - a) * F.cross_entropy(s, y),
         "by tau, not tau\\^2"),
        (lambda s, t, y, T, a: a * T**2 * F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1),
                                                     reduction="sum") + (1 - a) * F.cross_entropy(s, y),
         "summed the KL divergence over the N rows"),
        (lambda s, t, y, T, a: T**2 * (a * F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1),
                                            reduction="batchmean") + (1 - a) * F.cross_entropy(s, y)),
         "SOFT term only"),
    ],
)  # fmt: skip
def test_distillation_loss_names_typical_mistakes(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_distillation_loss(fn)
