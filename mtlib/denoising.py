"""Pretraining objectives of encoder-decoders as code (chapter 14): corrupt a text, learn to undo it.

Every function takes one sequence of token ids, a 1-D integer tensor ``(T,)``, and a seeded
``torch.Generator`` (``None`` uses PyTorch's global generator), and returns new tensors; the input
is never modified.

T5 (Raffel et al., 2020), *span corruption*:

- :func:`random_spans_noise_mask`: which tokens are noise; exactly ``round(T * noise_density)``
  of them, in ``round(noise / mean_span_length)`` spans, as the T5 code's
  ``random_spans_noise_mask`` draws them (the sequence starts with kept tokens and alternates);
- :func:`span_corruption`: each noise span becomes one sentinel in the input, and the target
  lists the spans, each after its sentinel; :func:`span_corruption_inverse` puts them back.

BART (Lewis et al., 2020), the noising functions of its ablation:

- :func:`token_masking`: BERT-style, some tokens replaced by a mask token;
- :func:`token_deletion`: some tokens removed (the model must also find *where*);
- :func:`text_infilling`: spans with Poisson(3) lengths, each replaced by ONE mask token, including
  spans of length 0 (a mask that hides nothing: the model must learn how many tokens are missing);
- :func:`sentence_permutation`: the sentences (ended by a full-stop token) shuffled;
- :func:`poisson_span_lengths`: the span-length sampler of text infilling.

The decoder of a BART model is trained to output the original sequence; T5's target is only the
missing spans (shorter targets: cheaper training).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "poisson_span_lengths",
    "random_spans_noise_mask",
    "sentence_permutation",
    "span_corruption",
    "span_corruption_inverse",
    "text_infilling",
    "token_deletion",
    "token_masking",
]


# --------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------


def _check_tokens(tokens: object, name: str = "tokens") -> Tensor:
    if not isinstance(tokens, Tensor):
        raise TypeError(
            f"{name} must be a 1-D integer torch.Tensor (T,), got {type(tokens).__name__}"
        )
    if tokens.dim() != 1:
        raise ValueError(f"{name} must be 1-D (T,), one sequence; got shape {tuple(tokens.shape)}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
    return tokens


def _check_fraction(value: object, name: str, *, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    ok = (0.0 < value < 1.0) if low_open else (0.0 <= value < 1.0)
    if not ok:
        interval = "(0, 1)" if low_open else "[0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return float(value)


def _check_id(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int token id, got {value!r}")
    return value


def _check_generator(generator: object) -> torch.Generator | None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    return generator


def _choose(n: int, k: int, generator: torch.Generator | None) -> Tensor:
    """``k`` distinct positions out of ``range(n)``, uniformly, sorted: (k,)."""
    return torch.randperm(n, generator=generator)[:k].sort().values


# --------------------------------------------------------------------------------------------
# T5: span corruption
# --------------------------------------------------------------------------------------------


def _random_segmentation(
    num_items: int, num_segments: int, generator: torch.Generator | None
) -> Tensor:
    """Split ``num_items`` into ``num_segments`` positive lengths, uniformly: (num_segments,)."""
    cuts = _choose(num_items - 1, num_segments - 1, generator) + 1  # (S-1,) segment starts
    edges = torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.tensor([num_items])])  # (S+1,)
    return edges.diff()  # (S,) each >= 1


def random_spans_noise_mask(
    length: int,
    *,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    random_roll: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """T5's noise mask: ``round(length * noise_density)`` noise tokens in spans of mean length.

    As in the T5 code (``random_spans_noise_mask``): the number of noise tokens is rounded and kept
    in ``[1, length - 1]``, the number of spans is ``max(1, round(noise / mean_span_length))``; the
    noise tokens and the kept tokens are each cut into that many non-empty pieces uniformly at
    random, and the pieces alternate, kept first. So the mean span length is exact per sequence
    up to rounding, and no two spans touch. It also means that the LAST token is always noise
    (the pieces end with a noise piece): T5's later code added ``random_roll``, which rotates
    the mask by a random offset to remove this bias (a span may then wrap around the end).

    Args:
        length: sequence length ``T >= 2``.
        noise_density: share of tokens to corrupt, in (0, 1); T5 uses 0.15.
        mean_span_length: mean length of a noise span, ``>= 1``; T5 uses 3.
        random_roll: rotate the mask by a random offset (default False, as in T5's code).
        generator: a seeded ``torch.Generator`` (``None``: the global one).

    Returns:
        (T,) bool, True = noise.
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise ValueError(
            f"length must be an int >= 2 (one kept and one noise token), got {length!r}"
        )
    noise_density = _check_fraction(noise_density, "noise_density")
    if (
        isinstance(mean_span_length, bool)
        or not isinstance(mean_span_length, (int, float))
        or mean_span_length < 1
    ):
        raise ValueError(f"mean_span_length must be a number >= 1, got {mean_span_length!r}")
    generator = _check_generator(generator)
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_spans = max(round(num_noise / mean_span_length), 1)
    num_spans = min(num_spans, length - num_noise)  # each span needs a kept piece before it
    noise_lengths = _random_segmentation(num_noise, num_spans, generator)  # (S,)
    kept_lengths = _random_segmentation(length - num_noise, num_spans, generator)  # (S,)
    interleaved = torch.stack([kept_lengths, noise_lengths], dim=1).reshape(
        -1
    )  # (2S,) kept, noise, ..
    piece = torch.repeat_interleave(torch.arange(2 * num_spans), interleaved)  # (T,) piece index
    noise = piece % 2 == 1
    if random_roll:
        noise = noise.roll(int(torch.randint(0, length, (1,), generator=generator)))
    return noise


def span_corruption(
    tokens: Tensor,
    *,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    sentinel_ids: Sequence[int],
    eos_id: int | None = None,
    random_roll: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """T5's objective: drop spans from the input, one sentinel each; the target lists the spans.

    ``"Thank you for inviting me to your party last week ."`` becomes the input
    ``"Thank you <X> me to your party <Y> week ."`` and the target ``"<X> for inviting <Y> last"``
    (``<X>``, ``<Y>`` = ``sentinel_ids[0]``, ``sentinel_ids[1]``; T5's vocabulary numbers them
    down from its end, ``<extra_id_0>`` = 32099). T5's code appends EOS to both (``eos_id``).

    Args:
        tokens: (T,) token ids, ``T >= 2``.
        noise_density: share of tokens dropped, in (0, 1).
        mean_span_length: mean span length, ``>= 1``.
        sentinel_ids: distinct ids of the sentinels, at least as many as spans (about
            ``T * noise_density / mean_span_length``); they must not occur in ``tokens``.
        eos_id: appended to input and target when given.
        random_roll: rotate the noise mask (see :func:`random_spans_noise_mask`).
        generator: a seeded ``torch.Generator``.

    Returns:
        ``(inputs, targets)``: (T - noise + S [+1],) and (noise + S [+1],), S = number of spans.
    """
    tokens = _check_tokens(tokens)
    sentinels = [_check_id(s, "sentinel_ids") for s in sentinel_ids]
    if len(set(sentinels)) != len(sentinels):
        raise ValueError(f"sentinel_ids must be distinct, got {sentinels}")
    if torch.isin(tokens, torch.tensor(sentinels, dtype=tokens.dtype)).any():
        raise ValueError(
            "tokens already contain one of sentinel_ids: the targets would be ambiguous"
        )
    noise = random_spans_noise_mask(tokens.numel(), noise_density=noise_density, mean_span_length=mean_span_length,
                                    random_roll=random_roll, generator=generator)  # fmt: skip
    starts = noise & ~torch.cat(
        [torch.zeros(1, dtype=torch.bool), noise[:-1]]
    )  # (T,) first of a span
    num_spans = int(starts.sum())
    if len(sentinels) < num_spans:
        raise ValueError(
            f"sentinel_ids has {len(sentinels)} ids but the sequence has {num_spans} spans"
        )
    span_id = starts.long().cumsum(0) - 1  # (T,) index of the current span (-1 before the first)
    sentinel = torch.tensor(sentinels, dtype=tokens.dtype)[span_id.clamp(min=0)]  # (T,)
    # input: keep the non-noise tokens; the first token of each span becomes its sentinel
    keep_in = ~noise | starts
    inputs = torch.where(starts, sentinel, tokens)[keep_in]
    # target: before the first token of each span, its sentinel; then the span's tokens
    targets = torch.stack([sentinel, tokens], dim=1)[noise]  # (N, 2) sentinel, token
    targets = targets[torch.stack([starts[noise], torch.ones_like(starts[noise])], dim=1)]  # flat
    if eos_id is not None:
        eos = torch.tensor([_check_id(eos_id, "eos_id")], dtype=tokens.dtype)
        inputs, targets = torch.cat([inputs, eos]), torch.cat([targets, eos])
    return inputs, targets


def span_corruption_inverse(
    inputs: Tensor, targets: Tensor, *, sentinel_ids: Sequence[int], eos_id: int | None = None
) -> Tensor:
    """Undo :func:`span_corruption`: put each target span back in place of its sentinel.

    Args:
        inputs: (T_in,) corrupted input.
        targets: (T_out,) the sentinels, each followed by its span.
        sentinel_ids: the sentinels used for the corruption.
        eos_id: removed from the end of both when given.

    Returns:
        (T,) the original sequence.
    """
    inputs, targets = _check_tokens(inputs, "inputs"), _check_tokens(targets, "targets")
    if eos_id is not None:
        inputs = inputs[:-1] if inputs.numel() and int(inputs[-1]) == eos_id else inputs
        targets = targets[:-1] if targets.numel() and int(targets[-1]) == eos_id else targets
    sentinel_set = set(sentinel_ids)
    spans: dict[int, list[int]] = {}
    current: int | None = None
    for token in targets.tolist():
        if token in sentinel_set:
            current = token
            spans[current] = []
        elif current is None:
            raise ValueError("targets must start with a sentinel")
        else:
            spans[current].append(token)
    out: list[int] = []
    for token in inputs.tolist():
        out.extend(spans[token] if token in sentinel_set else [token])
    return torch.tensor(out, dtype=inputs.dtype)


# --------------------------------------------------------------------------------------------
# BART: the noising functions
# --------------------------------------------------------------------------------------------


def token_masking(
    tokens: Tensor, *, mask_id: int, p: float = 0.15, generator: torch.Generator | None = None
) -> Tensor:
    """Replace ``round(T * p)`` tokens, chosen uniformly, by ``mask_id``: (T,).

    Args:
        tokens: (T,) token ids.
        mask_id: the mask token.
        p: share of tokens masked, in [0, 1).
        generator: a seeded ``torch.Generator``.
    """
    tokens, mask_id = _check_tokens(tokens), _check_id(mask_id, "mask_id")
    p, generator = _check_fraction(p, "p", low_open=False), _check_generator(generator)
    out = tokens.clone()
    out[_choose(tokens.numel(), round(tokens.numel() * p), generator)] = mask_id
    return out


def token_deletion(
    tokens: Tensor, *, p: float = 0.15, generator: torch.Generator | None = None
) -> Tensor:
    """Delete ``round(T * p)`` tokens chosen uniformly; the others keep their order: (T - k,).

    Args:
        tokens: (T,) token ids.
        p: share of tokens deleted, in [0, 1).
        generator: a seeded ``torch.Generator``.
    """
    tokens = _check_tokens(tokens)
    p, generator = _check_fraction(p, "p", low_open=False), _check_generator(generator)
    keep = torch.ones(tokens.numel(), dtype=torch.bool)
    keep[_choose(tokens.numel(), round(tokens.numel() * p), generator)] = False
    return tokens[keep]


def poisson_span_lengths(
    num_tokens: int, *, poisson_lambda: float = 3.0, generator: torch.Generator | None = None
) -> Tensor:
    """Span lengths drawn from Poisson(lambda) until they cover ``num_tokens``; the last is cut.

    Lengths of 0 are kept (BART's zero-length spans). The result sums to ``num_tokens`` exactly.

    Args:
        num_tokens: tokens to cover, ``>= 0``.
        poisson_lambda: mean span length, ``> 0``; BART uses 3.
        generator: a seeded ``torch.Generator``.

    Returns:
        (S,) long, non-negative, summing to ``num_tokens``.
    """
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
        raise ValueError(f"num_tokens must be an int >= 0, got {num_tokens!r}")
    if (
        isinstance(poisson_lambda, bool)
        or not isinstance(poisson_lambda, (int, float))
        or poisson_lambda <= 0
    ):
        raise ValueError(f"poisson_lambda must be a number > 0, got {poisson_lambda!r}")
    generator = _check_generator(generator)
    lengths: list[int] = []
    total = 0
    rate = torch.full((64,), float(poisson_lambda))
    while total < num_tokens:
        for length in torch.poisson(rate, generator=generator).long().tolist():
            lengths.append(min(length, num_tokens - total))
            total += lengths[-1]
            if total >= num_tokens:
                break
    return torch.tensor(lengths, dtype=torch.long)


def text_infilling(
    tokens: Tensor,
    *,
    mask_id: int,
    p: float = 0.3,
    poisson_lambda: float = 3.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """BART's best noise: spans of Poisson(3) length, each replaced by ONE ``mask_id``.

    ``round(T * p)`` tokens are hidden in total (BART masks 30%). The span lengths come from
    :func:`poisson_span_lengths` (zero-length spans included: a mask inserted between two tokens,
    hiding nothing). The spans go to distinct gaps between the kept tokens, chosen uniformly, so
    every mask stands for one span and the model must also predict how long each one was.

    Args:
        tokens: (T,) token ids.
        mask_id: the mask token; must not occur in ``tokens``.
        p: share of tokens hidden, in [0, 1).
        poisson_lambda: mean span length, ``> 0``.
        generator: a seeded ``torch.Generator``.

    Returns:
        (T - round(T * p) + S,) the kept tokens in order with S mask tokens among them.
    """
    tokens, mask_id = _check_tokens(tokens), _check_id(mask_id, "mask_id")
    p, generator = _check_fraction(p, "p", low_open=False), _check_generator(generator)
    if (tokens == mask_id).any():
        raise ValueError("tokens already contain mask_id")
    n = tokens.numel()
    num_hidden = round(n * p)
    lengths = poisson_span_lengths(num_hidden, poisson_lambda=poisson_lambda, generator=generator)
    num_gaps = n - num_hidden + 1  # before, between and after the kept tokens
    lengths = lengths[:num_gaps]  # (S,) at most one span per gap
    lengths[-1:] += num_hidden - int(lengths.sum())  # (never shorter when spans were dropped)
    gaps = _choose(num_gaps, lengths.numel(), generator)  # (S,) gap of each span, sorted
    # Walk the sequence: a gap g sits before the g-th kept token
    out: list[int] = []
    position, gap_of_span = 0, dict(zip(gaps.tolist(), lengths.tolist(), strict=True))
    for gap in range(num_gaps):
        if gap in gap_of_span:
            out.append(mask_id)
            position += gap_of_span[gap]  # skip the hidden tokens
        if gap < num_gaps - 1:
            out.append(int(tokens[position]))
            position += 1
    return torch.tensor(out, dtype=tokens.dtype)


def sentence_permutation(
    tokens: Tensor, *, sep_id: int, generator: torch.Generator | None = None
) -> Tensor:
    """Shuffle the sentences of ``tokens``; a sentence ends with ``sep_id`` (a full stop): (T,).

    Tokens after the last ``sep_id`` form a last sentence. The tokens inside each sentence keep
    their order.

    Args:
        tokens: (T,) token ids.
        sep_id: the token that ends a sentence.
        generator: a seeded ``torch.Generator``.
    """
    tokens, sep_id = _check_tokens(tokens), _check_id(sep_id, "sep_id")
    generator = _check_generator(generator)
    ends = (tokens == sep_id).nonzero().flatten() + 1  # (K,) one past each full stop
    bounds = [0, *ends.tolist()]
    if bounds[-1] != tokens.numel():
        bounds.append(tokens.numel())
    sentences = [tokens[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if not sentences:
        return tokens.clone()
    order = torch.randperm(len(sentences), generator=generator).tolist()
    return torch.cat([sentences[i] for i in order])
