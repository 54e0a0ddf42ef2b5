"""What T5 and BART share: input checks, loading with Hugging Face's names, and the generation loop.

Both models are encoder-decoders with the same outer interface (``encode``, ``decode`` with a
list of per-block :class:`~mtlib.blocks.DecoderCache`, ``new_cache``); :func:`generate` runs
either of them token by token exactly as ``transformers``' greedy/sampling ``generate`` does:
the decoder starts from ``decoder_start_token_id``, a row that has emitted ``eos_token_id`` is
padded with ``pad_token_id`` afterwards, and the loop stops early once every row has finished.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

import torch
from torch import Tensor, nn

from mtlib import _checks
from mtlib.blocks import DecoderCache
from mtlib.loading import load_weights
from mtlib.models.gpt import GPT, _check_generate_args


class EncoderDecoder(Protocol):
    """The part of :class:`~mtlib.models.t5.T5` and :class:`~mtlib.models.bart.BART` that
    :func:`generate` uses."""

    training: bool

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor: ...

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        attention_mask: Tensor | None = None,
        *,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor: ...

    def new_cache(self) -> list[DecoderCache]: ...

    def train(self, mode: bool = True) -> EncoderDecoder: ...


def load_renamed(
    module: nn.Module,
    tensors: Mapping[str, Tensor],
    renamed: Mapping[str, str],
    renames: Iterable[tuple[str, str]],
) -> None:
    """:func:`~mtlib.loading.load_weights` after a first renaming pass, with errors that name
    each tensor as the reference does.

    Some names cannot go through a table of renames alone (T5's ``layer.1`` is the encoder's
    feed-forward but the decoder's cross-attention): a model first gives those tensors an
    intermediate name (``renamed``: theirs -> intermediate), then the table maps the rest.

    Args:
        module: ours, already on the right device and dtype.
        tensors: the reference's tensors by their names.
        renamed: an intermediate name for every key of ``tensors``.
        renames: ``(intermediate, ours)`` pairs for :func:`~mtlib.loading.load_weights`.

    Raises:
        ValueError: on a missing, unexpected or misshapen tensor, naming the reference's tensor.
    """
    try:
        load_weights(module, {renamed[k]: v for k, v in tensors.items()}, renames)
    except ValueError as err:
        message = str(err)
        for theirs, middle in renamed.items():  # their name comes first in the message
            if middle != theirs:  # whole names only: blocks.1.x is not inside blocks.11.x
                pattern = rf"(?<![\w.]){re.escape(middle)}(?![\w.])"
                message = re.sub(pattern, theirs, message, count=1)
        raise ValueError(message) from None


def check_memory(memory: object, batch: int, d_model: int) -> Tensor:
    """``memory`` must be the encoder output (batch, T_enc, d_model)."""
    expected = f"(batch={batch}, T_enc, d_model={d_model}), the output of encode"
    return _checks.float_tensor(memory, "memory", expected, (batch, None, d_model))


def check_same_batch(input_ids: Tensor, decoder_input_ids: Tensor) -> None:
    """The encoder and decoder inputs must have the same batch size."""
    if input_ids.shape[0] != decoder_input_ids.shape[0]:
        raise ValueError(
            f"decoder_input_ids must have batch size {input_ids.shape[0]} like input_ids, "
            f"got {tuple(decoder_input_ids.shape)}"
        )


def check_cache(cache: object, num_blocks: int) -> list[DecoderCache] | None:
    """``cache`` is None or one :class:`~mtlib.blocks.DecoderCache` per decoder block."""
    if cache is None:
        return None
    if not isinstance(cache, list) or not all(isinstance(c, DecoderCache) for c in cache):
        raise TypeError(
            f"cache must be a list of DecoderCache (from new_cache()), got {type(cache).__name__}"
        )
    if len(cache) != num_blocks:
        raise ValueError(
            f"cache must hold one DecoderCache per decoder block ({num_blocks}), got {len(cache)}"
        )
    return cache


@torch.no_grad()
def generate(
    model: EncoderDecoder,
    input_ids: Tensor,
    max_new_tokens: int,
    attention_mask: Tensor | None,
    *,
    start_id: int,
    eos_id: int,
    pad_id: int,
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    generator: torch.Generator | None,
    use_cache: bool,
) -> Tensor:
    """Decode up to ``max_new_tokens`` tokens after ``start_id``, in eval mode.

    The encoder runs once. With ``use_cache`` every step feeds only the newest token: its keys
    and values are appended to each block's self-attention cache, and the cross-attention
    keys and values (the encoder memory projected by each block) are computed on the first
    step and kept in a static cache. Without it, every step decodes the whole prefix again:
    the same tokens, for more work (a test asserts they are equal).

    Returns:
        Token ids (B, 1 + n), n <= max_new_tokens: the start token, then the choices; after a
        row's ``eos_id`` come ``pad_id``s; the loop ends once every row has its eos.
    """
    _check_generate_args(max_new_tokens, temperature, top_k, None)  # GPT's checks (no top_p)
    if not isinstance(do_sample, bool):
        raise TypeError(f"do_sample must be a bool, got {type(do_sample).__name__}")
    was_training = model.training
    model.train(False)
    try:
        memory = model.encode(input_ids, attention_mask)  # (B, T_enc, d_model), once
        batch = input_ids.shape[0]
        out = input_ids.new_full((batch, 1), start_id)  # (B, 1)
        finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)  # (B,)
        cache = model.new_cache() if use_cache else None
        for _ in range(max_new_tokens):
            step = out[:, -1:] if use_cache else out  # (B, 1) or (B, t)
            logits = model.decode(step, memory, attention_mask, cache=cache)[:, -1]  # (B, V)
            next_id = GPT._choose(logits, do_sample, temperature, top_k, None, generator)  # (B, 1)
            next_id = next_id.masked_fill(finished[:, None], pad_id)  # finished rows: padding
            out = torch.cat([out, next_id], dim=1)  # (B, t + 1)
            finished |= next_id[:, 0] == eos_id
            if bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return out
