"""Chapter 9, BERT: self-checks for the masking rule, the attention mask and distillation.

- :func:`check_mlm_masking`: BERT's 80/10/10 rule, checked by its statistics on a large batch
  (which tokens are chosen, what they become, what the labels hold);
- :func:`check_hf_attention_mask`: Hugging Face's 1/0 ``attention_mask`` (B, T) turned into
  mtlib's boolean mask (B, 1, 1, T);
- :func:`check_distillation_loss`: Hinton et al.'s soft-target loss with temperature.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from mtlib.exercises._core import _call, _Case, _check, _describe, _fail

__all__ = ["check_distillation_loss", "check_hf_attention_mask", "check_mlm_masking"]

IGNORE = -100


# --------------------------------------------------------------------------------------------
# 1. The 80/10/10 masking rule
# --------------------------------------------------------------------------------------------


def _share(part: torch.Tensor, whole: torch.Tensor) -> float:
    return part.sum().item() / max(whole.sum().item(), 1)


def check_mlm_masking(fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Check ``fn(input_ids, *, mask_id, vocab_size, special_ids, generator)``.

    It must return ``(inputs, labels)`` of the shape of ``input_ids`` (B, T): each non-special
    token is chosen with probability 0.15; a chosen token becomes ``mask_id`` with probability
    0.8, a random non-special id below ``vocab_size`` with probability 0.1, and stays itself
    with probability 0.1; ``labels`` holds the original id at chosen positions and -100
    elsewhere. The checker measures these rates on 120,000 tokens (tolerances of about five
    standard deviations), so a correct function passes whatever its random draws.

    Raises:
        CheckFailed: an ``AssertionError`` naming what was wrong, with a hint.
    """
    checker = "check_mlm_masking"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    V, CLS, SEP, PAD, MASK = 60, 0, 1, 2, 3
    ids = torch.randint(4, V, (300, 400), generator=torch.Generator().manual_seed(9))
    ids[:, 0], ids[:, -1], ids[:10, 300:] = CLS, SEP, PAD
    kwargs: dict[str, Any] = dict(mask_id=MASK, vocab_size=V, special_ids=(CLS, SEP, PAD),
                                  generator=torch.Generator().manual_seed(0))  # fmt: skip
    where = "300 rows of 400 tokens, vocabulary 60, specials [CLS]=0 [SEP]=1 [PAD]=2 [MASK]=3"
    got = _call(checker, where, fn, _Case(where, (ids,), kwargs))
    if not (
        isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)
    ):
        raise _fail(
            checker, where, f"expected a pair of tensors (inputs, labels), got {_describe(got)}"
        )
    inputs, labels = got
    for name, t in (("inputs", inputs), ("labels", labels)):
        if tuple(t.shape) != tuple(ids.shape) or t.dtype != torch.long:
            raise _fail(checker, where, f"{name} must be a long tensor of shape {tuple(ids.shape)}, "
                        f"got {t.dtype} {tuple(t.shape)}")  # fmt: skip
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    if (labels != IGNORE).all():
        raise _fail(checker, where, "labels has no -100: every position is a target",
                    "the loss is computed at the chosen positions only; put -100 (ignored by "
                    "F.cross_entropy) everywhere else")  # fmt: skip
    chosen = labels != IGNORE
    if chosen[special].any() or not torch.equal(inputs[special], ids[special]):
        raise _fail(checker, where, "a special token ([CLS], [SEP] or [PAD]) was chosen or changed",
                    "exclude special_ids before choosing, e.g. with torch.isin")  # fmt: skip
    if not torch.equal(labels[chosen], ids[chosen]):
        raise _fail(checker, where, "at chosen positions labels must hold the ORIGINAL ids",
                    "build labels from input_ids, not from the corrupted inputs")  # fmt: skip
    if not torch.equal(inputs[~chosen], ids[~chosen]):
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
    expected = (0.8, 0.1 * (1 - 1 / 56), 0.1 * (1 + 1 / 56))  # a random draw may be the same id
    if any(abs(s - e) > 0.02 for s, e in zip(shares, expected, strict=True)):
        raise _fail(checker, where, f"of the chosen tokens: {rates}; expected about 80%, 10%, 10%",
                    "draw one uniform number u per chosen token: u < 0.8 -> [MASK], "
                    "0.8 <= u < 0.9 -> random, else keep")  # fmt: skip
    drawn = inputs[replaced]
    if ((drawn == CLS) | (drawn == SEP) | (drawn == PAD) | (drawn == MASK)).any() or (
        drawn >= V
    ).any():
        raise _fail(checker, where, "a random replacement is a special id or outside the vocabulary",
                    "draw replacements from the ordinary ids only")  # fmt: skip
    print(f"{checker}: all rates within tolerance ({rate:.1%} chosen; {rates}).")


# --------------------------------------------------------------------------------------------
# 2. Hugging Face's attention mask -> mtlib's bool mask
# --------------------------------------------------------------------------------------------


def check_hf_attention_mask(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(attention_mask)``: Hugging Face's (B, T) mask of 1 (token) and 0 (padding)
    as mtlib's bool mask (B, 1, 1, T), True where a key may be attended.

    Recognised mistakes: a float or integer result (it would be *added* to the scores), the
    opposite sign (PyTorch's ``key_padding_mask``), the mask on the queries (B, 1, T, 1), no
    head and query dimensions (B, T).

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_hf_attention_mask"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    cases = [
        _Case("2 rows of 5, one padded", (torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]),)),
        _Case(
            "3 rows of 4, float 1.0/0.0 as some tokenizers give",
            (torch.tensor([[1.0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]),),
        ),  # fmt: skip
        _Case("1 row of 6, bool", (torch.tensor([[True] * 4 + [False] * 2]),)),
    ]
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        (hf,) = case.args
        expected = hf.bool()[:, None, None, :]  # (B, 1, 1, T)
        if not isinstance(got, torch.Tensor):
            raise _fail(checker, where, f"expected a torch.Tensor, got {_describe(got)}")
        if got.dtype != torch.bool:
            raise _fail(checker, where, f"expected a bool tensor, got dtype {got.dtype}",
                        "mtlib refuses float and integer masks: a 0/1 float mask would be ADDED to "
                        "the scores and hide nothing; use .bool() or a comparison")  # fmt: skip
        B, T = hf.shape
        if tuple(got.shape) == (B, T):
            raise _fail(checker, where, f"shape (B, T) = {(B, T)}, expected (B, 1, 1, T)",
                        "the scores are (B, H, T_q, T_k): add the head and query dimensions, "
                        "mask[:, None, None, :]")  # fmt: skip
        if tuple(got.shape) == (B, 1, T, 1):
            raise _fail(checker, where, "your mask lies along the queries (B, 1, T, 1)",
                        "padding hides KEYS, the last dimension: (B, 1, 1, T)")  # fmt: skip
        if tuple(got.shape) != tuple(expected.shape):
            raise _fail(
                checker, where, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
            )
        if torch.equal(got, ~expected):
            raise _fail(checker, where, "your mask has the opposite sign",
                        "in mtlib True means 'may attend' (the tokens, 1 in Hugging Face's mask); "
                        "True = padding is PyTorch's key_padding_mask convention")  # fmt: skip
        if not torch.equal(got, expected):
            raise _fail(checker, where, "some entries differ from the reference")
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 3. The distillation loss
# --------------------------------------------------------------------------------------------


def _distill(student: Any, teacher: Any, labels: Any, temperature: Any, alpha: Any, *,
             t2: bool = True, reverse: bool = False, teacher_t: bool = True,
             per_element: bool = False, soft_ce: bool = False) -> torch.Tensor:  # fmt: skip
    s = F.log_softmax(student / temperature, dim=-1)
    t = F.log_softmax(teacher / (temperature if teacher_t else 1.0), dim=-1)
    if reverse:
        terms = s.exp() * (s - t)  # (N, C)
    elif soft_ce:
        terms = -t.exp() * s  # (N, C): cross-entropy with the soft targets, not the KL
    else:
        terms = t.exp() * (t - s)  # (N, C)
    kl = terms.mean() if per_element else terms.sum(-1).mean()  # per element: / (N C), not / N
    scale = temperature**2 if t2 else 1.0
    return alpha * scale * kl + (1 - alpha) * F.cross_entropy(student, labels)


def check_distillation_loss(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(student_logits, teacher_logits, labels, temperature, alpha)``.

    For logits (N, C) and labels (N,): ``alpha * tau^2 * KL(p_teacher^tau || p_student^tau)`` (mean
    over the N rows) ``+ (1 - alpha) * cross_entropy(student_logits, labels)``, where ``p^tau`` is
    the softmax of the logits divided by tau {Hinton et al. 2015}. Recognised mistakes: no tau^2
    factor, the KL divergence reversed, the teacher not softened, the KL averaged over the
    N C elements (``reduction="mean"``) instead of the N rows (``"batchmean"``), the soft
    cross-entropy in place of the KL divergence.

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
    }

    _check("check_distillation_loss", fn, cases, variant(), atol=1e-5, mistakes=mistakes)
