"""Chapter 9, BERT: self-checks for the masking rule, masked mean pooling and distillation.

- :func:`check_mlm_masking`: BERT's 80/10/10 rule, checked by its statistics on a large batch
  (which tokens are chosen, what they become, what the labels hold);
- :func:`check_masked_mean_pool`: the mean of the hidden states over the real tokens (the
  alternative to the ``[CLS]`` vector), a fully padded row included;
- :func:`check_distillation_loss`: Hinton et al.'s soft-target loss with temperature.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from mtlib.exercises._core import _call, _Case, _check, _describe, _fail

__all__ = [
    "check_distillation_loss",
    "check_masked_mean_pool",
    "check_mlm_masking",
]

IGNORE = -100


# --------------------------------------------------------------------------------------------
# 1. The 80/10/10 masking rule
# --------------------------------------------------------------------------------------------


def _share(part: torch.Tensor, whole: torch.Tensor) -> float:
    return part.sum().item() / max(whole.sum().item(), 1)


def _masking_layout(
    n_ordinary: int, specials_first: bool
) -> tuple[torch.Tensor, dict[str, Any], str]:
    """300 rows of 400 tokens with [CLS] ... [SEP] and some [PAD] rows, and the call's keywords."""
    V = n_ordinary + 4
    if specials_first:  # [CLS]=0 [SEP]=1 [PAD]=2 [MASK]=3, then the ordinary ids
        CLS, SEP, PAD, MASK, low = 0, 1, 2, 3, 4
        where = "300 rows of 400 tokens, vocabulary 60, specials [CLS]=0 [SEP]=1 [PAD]=2 [MASK]=3"
    else:  # the chapter's layout: the specials appended after the ordinary ids
        PAD, CLS, SEP, MASK, low = n_ordinary, n_ordinary + 1, n_ordinary + 2, n_ordinary + 3, 0
        where = (f"300 rows of 400 tokens, vocabulary {V}: ordinary ids 0-{n_ordinary - 1}, then "
                 f"specials [PAD]={PAD} [CLS]={CLS} [SEP]={SEP} [MASK]={MASK}, as in the chapter")  # fmt: skip
    ids = torch.randint(
        low, low + n_ordinary, (300, 400), generator=torch.Generator().manual_seed(9)
    )
    ids[:, 0], ids[:, -1], ids[:10, 300:] = CLS, SEP, PAD
    kwargs: dict[str, Any] = dict(mask_id=MASK, vocab_size=V, special_ids=(CLS, SEP, PAD),
                                  generator=torch.Generator().manual_seed(0))  # fmt: skip
    return ids, kwargs, where


def _mlm_outputs(
    checker: str, where: str, got: Any, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    if not (
        isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)
    ):
        raise _fail(
            checker, where, f"expected a pair of tensors (inputs, labels), got {_describe(got)}"
        )
    for name, t in zip(("inputs", "labels"), got, strict=True):
        if tuple(t.shape) != tuple(ids.shape) or t.dtype != torch.long:
            raise _fail(checker, where, f"{name} must be a long tensor of shape {tuple(ids.shape)}, "
                        f"got {t.dtype} {tuple(t.shape)}")  # fmt: skip
    return got[0].detach().cpu(), got[1].detach().cpu()  # a GPU answer is checked too


def _check_masking_rates(
    checker: str, fn: Callable[..., Any], n_ordinary: int, specials_first: bool
) -> str:
    ids, kwargs, where = _masking_layout(n_ordinary, specials_first)
    MASK, specials = kwargs["mask_id"], kwargs["special_ids"]
    inputs, labels = _mlm_outputs(
        checker, where, _call(checker, where, fn, _Case(where, (ids,), kwargs)), ids
    )
    special = torch.isin(ids, torch.tensor(specials))
    if (labels != IGNORE).all():
        raise _fail(checker, where, "labels has no -100: every position is a target",
                    "the loss is computed at the chosen positions only; put -100 (ignored by "
                    "F.cross_entropy) everywhere else")  # fmt: skip
    chosen = labels != IGNORE
    if _share(chosen & ~special, ~special) > 0.5:
        raise _fail(checker, where, f"{_share(chosen & ~special, ~special):.0%} of the ordinary "
                    "tokens have a label: your labels are inverted",
                    "-100 goes at the positions that were NOT chosen; the original id at the "
                    "chosen ones")  # fmt: skip
    if chosen[special].any() or not torch.equal(inputs[special], ids[special]):
        raise _fail(checker, where, "a special token ([CLS], [SEP] or [PAD]) was chosen or changed",
                    "exclude special_ids before choosing, e.g. with torch.isin")  # fmt: skip
    if not torch.equal(labels[chosen], ids[chosen]):
        raise _fail(checker, where, "at chosen positions labels must hold the ORIGINAL ids",
                    "build labels from input_ids, not from the corrupted inputs")  # fmt: skip
    if not torch.equal(inputs[~chosen], ids[~chosen]):
        if (inputs[chosen] == MASK).all():
            raise _fail(checker, where, "labels are set at the [MASK] positions only, yet other "
                        "positions were changed: the random replacements have label -100",
                        "the random and the kept tokens are chosen tokens too: the model must "
                        "predict their original id, so their labels are not -100")  # fmt: skip
        raise _fail(checker, where, "a token that was not chosen was changed",
                    "only chosen positions (labels != -100) may change")  # fmt: skip
    rate = _share(chosen, ~special)
    if abs(rate - 0.15) > 0.006:
        raise _fail(checker, where, f"{rate:.1%} of the ordinary tokens are chosen, expected 15%",
                    "choose each non-special token independently with probability 0.15; the "
                    "80/10/10 split applies to the chosen ones only")  # fmt: skip
    masked, kept = chosen & (inputs == MASK), chosen & (inputs == ids)
    replaced = chosen & ~masked & ~kept
    shares = (_share(masked, chosen), _share(replaced, chosen), _share(kept, chosen))
    rates = f"{shares[0]:.1%} [MASK], {shares[1]:.1%} random, {shares[2]:.1%} kept"
    if shares[0] > 0.97:
        raise _fail(checker, where, f"of the chosen tokens: {rates}",
                    "only 80% become [MASK]; 10% get a random token and 10% stay, so that the model "
                    "cannot ignore the positions without [MASK] (fine-tuning inputs have none)")  # fmt: skip
    drawn = inputs[replaced]
    if (
        torch.isin(drawn, torch.tensor([*specials, MASK])).any()
        or (drawn >= kwargs["vocab_size"]).any()
    ):
        raise _fail(checker, where, "a random replacement is a special id or outside the vocabulary",
                    "draw replacements from the ordinary ids only, wherever the specials sit in "
                    "the vocabulary (the chapter's are the LAST ids)")  # fmt: skip
    ordinary = torch.tensor([i for i in range(kwargs["vocab_size"]) if i not in (*specials, MASK)])
    never = ordinary[~torch.isin(ordinary, drawn)]
    if len(never):  # each ordinary id is drawn about 30 times or more
        raise _fail(checker, where, f"ordinary id {never[0].item()} is never drawn as a random "
                    "replacement", "draw replacements uniformly from ALL the ordinary ids")  # fmt: skip
    n = n_ordinary
    if not specials_first and shares[0] - 0.8 > 0.1 / (2 * (n + 1)):  # 11 sd apart with 2 ids
        raise _fail(checker, where, f"of the chosen tokens: {rates}; with {n} ordinary ids, a "
                    "[MASK] share this far above 80% means a random replacement can be [MASK]",
                    "[MASK] is a special id: exclude it from the random replacements")  # fmt: skip
    expected = (0.8, 0.1 * (1 - 1 / n), 0.1 * (1 + 1 / n))  # a random draw may be the same id
    if any(abs(s - e) > 0.02 for s, e in zip(shares, expected, strict=True)):
        raise _fail(checker, where, f"of the chosen tokens: {rates}; expected about 80%, "
                    f"{expected[1]:.0%}, {expected[2]:.0%}",
                    "the 80/10/10 split is of the CHOSEN tokens: one draw per chosen token decides "
                    "between [MASK], random and kept")  # fmt: skip
    return f"{rate:.1%} chosen; {rates}"


def check_mlm_masking(fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Check ``fn(input_ids, *, mask_id, vocab_size, special_ids, generator)``.

    It must return ``(inputs, labels)`` of the shape of ``input_ids`` (B, T): each non-special
    token is chosen with probability 0.15; a chosen token becomes ``mask_id`` with probability
    0.8, a random ordinary id (not special, not ``mask_id``) below ``vocab_size`` with
    probability 0.1, and stays itself with probability 0.1; ``labels`` holds the original id at
    chosen positions and -100 elsewhere; every random draw uses ``generator``. The checker
    measures these rates on 120,000 tokens twice (tolerances of about five standard
    deviations), once with the specials as the first ids and once with them last (the chapter's
    vocabulary) and only two ordinary ids, where a [MASK] drawn as a replacement shows; it calls
    ``fn`` again with an equal generator and expects the same output.

    Raises:
        CheckFailed: an ``AssertionError`` naming what was wrong, with a hint.
    """
    checker = "check_mlm_masking"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    summary = _check_masking_rates(checker, fn, 56, specials_first=True)
    calls = []
    for _ in range(2):  # each call with a new generator seeded alike
        ids, kwargs, where = _masking_layout(56, specials_first=True)
        calls.append(
            _mlm_outputs(
                checker, where, _call(checker, where, fn, _Case(where, (ids,), kwargs)), ids
            )
        )
    first, again = calls
    if not all(torch.equal(a, b) for a, b in zip(first, again, strict=True)):
        raise _fail(checker, where, "two calls with equally seeded generators gave different masks",
                    "pass generator= to every random call (torch.rand, torch.randint, ...), so "
                    "that a fixed seed gives a fixed mask, as the chapter's evaluation needs")  # fmt: skip
    _check_masking_rates(checker, fn, 2, specials_first=False)
    print(f"{checker}: all rates within tolerance ({summary}).")


# --------------------------------------------------------------------------------------------
# 2. Mean pooling over the real tokens (the alternative to [CLS])
# --------------------------------------------------------------------------------------------


def _mean_pool(hidden: Any, attention_mask: Any, *, everywhere: bool = False, total: bool = False,
               over_t: bool = False, flipped: bool = False) -> torch.Tensor:  # fmt: skip
    h = hidden.double()
    m = attention_mask.double()[..., None]  # (B, T, 1)
    if flipped:
        m = 1 - m
    if everywhere:
        return h.mean(1)
    summed = (h * m).sum(1)  # (B, d)
    if total:
        return summed
    count = torch.full_like(m.sum(1), h.shape[1]) if over_t else m.sum(1).clamp(min=1)
    return summed / count


def check_masked_mean_pool(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(hidden, attention_mask)``: the mean of ``hidden`` (B, T, d) over the real tokens.

    ``attention_mask`` is Hugging Face's (B, T) mask of 1 (token) and 0 (padding), of any dtype;
    the result is (B, d). A row without any token gives zeros, not NaN (as mtlib's attention
    gives a fully padded row zeros). Recognised mistakes: the mean over all T positions
    (padding included), the sum instead of the mean, the masked sum divided by T, the mask
    flipped.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(5)
    h1, h2, h3 = (
        torch.randn(*shape, generator=g) + 1 for shape in ((3, 5, 4), (2, 6, 3), (3, 4, 2))
    )
    cases = [
        _Case("3 rows of 5 tokens, d=4, long mask, rows padded differently",
              (h1, torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]))),
        _Case("2 rows of 6, d=3, float 1.0/0.0 mask", (h2, torch.tensor([[1.0, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]]))),
        _Case("3 rows of 4, d=2, bool mask, the last row all padding (expected zeros)",
              (h3, torch.tensor([[True, True, False, False], [True] * 4, [False] * 4])),
              hint="a row without tokens divides 0 by 0: clamp the count of tokens to at least 1"),
    ]  # fmt: skip

    def variant(**flags: bool) -> Callable[..., torch.Tensor]:
        return lambda hidden, mask: _mean_pool(hidden, mask, **flags)

    mistakes = {
        "you averaged over all T positions: the [PAD] vectors join the mean; weight each position "
        "by the mask": variant(everywhere=True),
        "you return the masked SUM: divide by the number of real tokens of each row, so that a "
        "phrase's length does not scale its vector": variant(total=True),
        "you divided by T: divide by each row's number of real tokens (the mask's row sum), not by "
        "the padded length": variant(over_t=True),
        "your mask is flipped: 1 marks a real token, 0 the padding": variant(flipped=True),
    }
    _check("check_masked_mean_pool", fn, cases, variant(), atol=1e-5, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 3. The distillation loss
# --------------------------------------------------------------------------------------------


def _distill(student: Any, teacher: Any, labels: Any, temperature: Any, alpha: Any, *,
             t2: bool = True, reverse: bool = False, teacher_t: bool = True,
             per_element: bool = False, soft_ce: bool = False, swap_alpha: bool = False,
             hard_on_soft: bool = False, no_log_target: bool = False, tau_once: bool = False,
             row_sum: bool = False, t2_on_all: bool = False) -> torch.Tensor:  # fmt: skip
    if no_log_target:  # F.kl_div(log_s, log_t) without log_target=True: the log read as p
        s, log_t = (
            F.log_softmax(student / temperature, dim=-1),
            F.log_softmax(teacher / temperature, dim=-1),
        )
        kl = (log_t * (log_t.log() - s)).sum(-1).mean()  # log of a negative number: NaN
        return alpha * temperature**2 * kl + (1 - alpha) * F.cross_entropy(student, labels)
    if swap_alpha:
        alpha = 1 - alpha
    s = F.log_softmax(student / temperature, dim=-1)
    t = F.log_softmax(teacher / (temperature if teacher_t else 1.0), dim=-1)
    if reverse:
        terms = s.exp() * (s - t)  # (N, C)
    elif soft_ce:
        terms = -t.exp() * s  # (N, C): cross-entropy with the soft targets, not the KL
    else:
        terms = t.exp() * (t - s)  # (N, C)
    kl = terms.mean() if per_element else terms.sum(-1).mean()  # per element: / (N C), not / N
    if row_sum:
        kl = terms.sum()  # summed over the N rows, not averaged
    scale = (temperature if tau_once else temperature**2) if t2 else 1.0
    hard = F.cross_entropy(student / temperature if hard_on_soft else student, labels)
    if t2_on_all:
        return temperature**2 * (alpha * kl + (1 - alpha) * hard)
    return alpha * scale * kl + (1 - alpha) * hard


def check_distillation_loss(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(student_logits, teacher_logits, labels, temperature, alpha)``.

    For logits (N, C) and labels (N,): ``alpha * tau^2 * KL(p_teacher^tau || p_student^tau)`` (mean
    over the N rows) ``+ (1 - alpha) * cross_entropy(student_logits, labels)``, where ``p^tau`` is
    the softmax of the logits divided by tau {Hinton et al. 2015}. Recognised mistakes: no tau^2
    factor, the KL divergence reversed, the teacher not softened, the KL averaged over the
    N C elements (``reduction="mean"``) instead of the N rows (``"batchmean"``), the soft
    cross-entropy in place of the KL divergence, alpha and 1 - alpha swapped, the hard loss on
    the softened logits, ``F.kl_div`` given log-probabilities without ``log_target=True`` (NaN),
    tau in place of tau^2, the KL summed over the rows, tau^2 on the whole loss.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(3)
    s1, t1 = torch.randn(6, 3, generator=g), 3 * torch.randn(6, 3, generator=g)
    s2, t2 = torch.randn(4, 5, generator=g), 2 * torch.randn(4, 5, generator=g)
    cases = [
        _Case("6 rows, 3 classes, tau=2, alpha=0.5", (s1, t1, torch.tensor([0, 1, 2, 0, 1, 2]), 2.0, 0.5),
              hint="KL(teacher || student) of the softened distributions, times tau^2, mixed with the hard loss"),
        _Case("4 rows, 5 classes, tau=4, alpha=0.9", (s2, t2, torch.tensor([4, 0, 3, 1]), 4.0, 0.9),
              hint="divide BOTH logits by tau before their softmaxes, multiply only the soft term by "
                   "tau^2, and take the cross-entropy with the labels on the unsoftened logits"),
        _Case("4 rows, 5 classes, tau=1, alpha=1 (soft targets only)", (s2, t2, torch.tensor([4, 0, 3, 1]), 1.0, 1.0)),
    ]  # fmt: skip

    def double(args: tuple[Any, ...]) -> list[Any]:
        return [
            x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in args
        ]

    def variant(**flags: bool) -> Callable[..., torch.Tensor]:
        def loss(*args: Any) -> torch.Tensor:
            return _distill(*double(args), **flags)

        return loss

    mistakes = {
        "multiply the soft term by tau^2: softening divides its gradients by tau^2, and Hinton et al. "
        "scale them back so that the two terms keep their balance when tau changes": variant(
            t2=False
        ),
        "the KL divergence is reversed: the teacher's distribution is the target, "
        "KL(p_teacher || p_student) = sum p_teacher (log p_teacher - log p_student)": variant(
            reverse=True
        ),
        "soften the teacher too: divide the teacher's logits by tau before its softmax": variant(
            teacher_t=False
        ),
        "you averaged the KL divergence over all N x C elements (F.kl_div's reduction='mean'); "
        "the KL of one row is a sum over its classes, averaged over the N rows: "
        "reduction='batchmean'": variant(per_element=True),
        "you computed the soft cross-entropy -sum p_teacher log p_student, not the KL divergence: "
        "they differ by the teacher's entropy (the same gradients, not the same value); "
        "KL = sum p_teacher (log p_teacher - log p_student)": variant(soft_ce=True),
        "alpha and 1 - alpha are swapped: alpha weighs the SOFT term (alpha = 1 is soft targets "
        "only)": variant(swap_alpha=True),
        "your hard loss uses the softened logits: the cross-entropy with the labels takes the "
        "student's logits as they are, not divided by tau": variant(hard_on_soft=True),
        "NaN: F.kl_div(log_student, log_teacher) without log_target=True reads its second "
        "argument as probabilities, and the log of a negative number is NaN; pass the teacher's "
        "probabilities, or log_target=True": variant(no_log_target=True),
        "you multiplied by tau, not tau^2: softening by tau scales the soft term's gradients by "
        "1/tau^2": variant(tau_once=True),
        "you summed the KL divergence over the N rows: average it over the rows (F.kl_div's "
        "reduction='batchmean'), so that the loss does not grow with the batch": variant(
            row_sum=True
        ),
        "tau^2 multiplies the SOFT term only: the hard cross-entropy is not softened and keeps its "
        "scale": variant(t2_on_all=True),
    }

    _check("check_distillation_loss", fn, cases, variant(), atol=1e-5, mistakes=mistakes)
