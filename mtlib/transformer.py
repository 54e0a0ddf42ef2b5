"""The encoder-decoder Transformer of Vaswani et al. (2017), and how to decode with it.

- :class:`TransformerConfig`: every size in one dataclass (a :class:`~mtlib.blocks.BlockConfig`
  plus vocabularies and depths), with presets.
- :class:`Encoder`, :class:`Decoder`: stacks of :class:`~mtlib.blocks.EncoderBlock` /
  :class:`~mtlib.blocks.DecoderBlock`, with an optional final LayerNorm.
- :class:`Transformer`: embeddings (scaled by sqrt(d_model)) + sinusoidal positions, the two
  stacks, and the output projection ``lm_head``.
- :func:`greedy_decode`, :func:`beam_search`: generation, with or without the KV cache.

Decoding with the cache feeds one token per step. That token sits at position t, and its
positional encoding must be row t of the table: :meth:`Transformer.decode` takes the offset
from the cache, so the step-by-step logits equal those of recomputing the whole prefix.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from mtlib import _checks
from mtlib.blocks import (
    BlockConfig,
    DecoderBlock,
    DecoderCache,
    EncoderBlock,
    load_torch_layers,
    torch_layer_config,
)
from mtlib.masks import causal_mask, padding_mask_from_tokens
from mtlib.positional import SinusoidalEncoding

__all__ = [
    "TransformerConfig",
    "Encoder",
    "Decoder",
    "Transformer",
    "greedy_decode",
    "beam_search",
]


@dataclass
class TransformerConfig(BlockConfig):
    """Sizes and switches of an encoder-decoder Transformer: the block settings plus these.

    The defaults are the paper's base model (:meth:`base`); :meth:`tiny` is the size the
    book trains on a CPU.
    """

    src_vocab: int = 1000  # source vocabulary size
    tgt_vocab: int = 1000  # target vocabulary size
    num_encoder_layers: int = 6  # N encoder blocks
    num_decoder_layers: int = 6  # N decoder blocks
    max_len: int = 512  # longest sequence the positional table covers
    final_norm: bool | None = None  # LayerNorm after each stack; None: only if norm_first
    pad_id: int | None = 0  # padding token id, masked out of attention; None: no padding
    tie_embeddings: bool = False  # the output projection reuses the target embedding
    share_embeddings: bool = False  # source and target share one embedding (one vocabulary)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in (
            "src_vocab",
            "tgt_vocab",
            "num_encoder_layers",
            "num_decoder_layers",
            "max_len",
        ):
            _checks.positive_int(getattr(self, name), name)
        if self.d_model % 2:
            raise ValueError(
                f"d_model must be even (sinusoidal positions come in sin/cos pairs), got {self.d_model}"
            )
        if self.share_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"share_embeddings needs src_vocab == tgt_vocab, got {self.src_vocab} and {self.tgt_vocab}"
            )
        if self.pad_id is not None and not 0 <= self.pad_id < min(self.src_vocab, self.tgt_vocab):
            raise ValueError(
                f"pad_id must lie in [0, {min(self.src_vocab, self.tgt_vocab)}) or be None, got {self.pad_id}"
            )

    @property
    def use_final_norm(self) -> bool:
        """Whether the stacks end with a LayerNorm (Pre-LN needs one; Post-LN already has one)."""
        return self.norm_first if self.final_norm is None else self.final_norm

    @classmethod
    def base(cls, **overrides: Any) -> TransformerConfig:
        """The paper's base model: d_model 512, 8 heads, 6+6 layers, d_ff 2048, dropout 0.1.

        With ``src_vocab = tgt_vocab = 37000`` and both sharing switches on (the paper's shared
        BPE vocabulary and three-way weight sharing) it has about 63M parameters (paper: 65M).
        """
        return replace(cls(), **overrides)

    @classmethod
    def big(cls, **overrides: Any) -> TransformerConfig:
        """The paper's big model: d_model 1024, 16 heads, d_ff 4096, dropout 0.3 (about 214M
        parameters with the shared 37000-token vocabulary; paper: 213M)."""
        return replace(cls(d_model=1024, num_heads=16, d_ff=4096, dropout=0.3), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> TransformerConfig:
        """A model that trains in seconds on a CPU: d_model 32, 4 heads, 2+2 layers."""
        small = cls(src_vocab=16, tgt_vocab=16, d_model=32, num_heads=4, num_encoder_layers=2,
                    num_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)  # fmt: skip
        return replace(small, **overrides)


def _final_norm(config: TransformerConfig) -> nn.Module:
    if not config.use_final_norm:
        return nn.Identity()
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)


def _stack_config(
    stack: nn.TransformerEncoder | nn.TransformerDecoder, name: str, **fields: Any
) -> TransformerConfig:
    """A config matching the layers of a PyTorch stack (``name``: the stack, for errors)."""
    block = dataclasses.asdict(torch_layer_config(stack.layers[0], f"{name}.layers[0]"))
    n = len(stack.layers)
    return TransformerConfig(
        **block,
        num_encoder_layers=n,
        num_decoder_layers=n,
        final_norm=stack.norm is not None,
        **fields,
    )


_S = TypeVar("_S", bound="_Stack")


class _Stack(nn.Module):
    """What the encoder and decoder stacks share: loading a PyTorch stack."""

    torch_stack: type[nn.Module]  # the PyTorch stack this one can be loaded from

    @classmethod
    def from_torch(cls: type[_S], stack: nn.TransformerEncoder | nn.TransformerDecoder) -> _S:
        """Build the stack with the weights of an ``nn.TransformerEncoder`` (for :class:`Encoder`)
        or ``nn.TransformerDecoder`` (for :class:`Decoder`) of ``batch_first=True`` layers.

        Args:
            stack: the PyTorch stack (``stack.norm`` may be None).

        Returns:
            A stack on the PyTorch stack's device and dtype, in its mode (training or eval),
            computing the same function.

        Raises:
            TypeError: If ``stack`` is not the matching PyTorch stack.
            ValueError: If its layers have ``batch_first=False`` or another activation than
                relu or gelu.
        """
        if not isinstance(stack, cls.torch_stack):
            raise TypeError(
                f"stack must be an nn.{cls.torch_stack.__name__}, got {type(stack).__name__}"
            )
        ours = cls(_stack_config(stack, "stack")).to(next(stack.parameters()))
        load_torch_layers(ours, stack)
        ours.train(stack.training)
        return ours


class Encoder(_Stack):
    """A stack of encoder blocks, then (if ``config.use_final_norm``) a LayerNorm.

    Args:
        config: sizes; uses ``num_encoder_layers`` and the block settings.

    Shape:
        forward: x (B, S, d_model) -> (B, S, d_model).
    """

    torch_stack = nn.TransformerEncoder

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderBlock(config) for _ in range(config.num_encoder_layers))
        self.norm = _final_norm(config)

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """Run every block, then the final norm.

        Args:
            x: embedded source of shape (B, S, d_model).
            mask: bool mask broadcastable to (B, H, S, S), e.g. padding (B, 1, 1, S).

        Returns:
            The memory, of shape (B, S, d_model).
        """
        for layer in self.layers:
            x = layer(x, mask=mask)
        return self.norm(x)


class Decoder(_Stack):
    """A stack of decoder blocks, then (if ``config.use_final_norm``) a LayerNorm.

    Args:
        config: sizes; uses ``num_decoder_layers`` and the block settings.

    Shape:
        forward: x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).
    """

    torch_stack = nn.TransformerDecoder

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderBlock(config) for _ in range(config.num_decoder_layers))
        self.norm = _final_norm(config)

    def new_cache(self) -> list[DecoderCache]:
        """An empty cache: one :class:`~mtlib.blocks.DecoderCache` per block."""
        return [DecoderCache() for _ in self.layers]

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Run every block, then the final norm.

        Args:
            x: embedded target of shape (B, T, d_model) (only the new positions with a cache).
            memory: encoder output of shape (B, S, d_model).
            self_mask: bool self-attention mask broadcastable to (B, H, T, t + T), t cached.
            memory_mask: bool cross-attention mask broadcastable to (B, H, T, S).
            cache: from :meth:`new_cache`, updated in place.

        Returns:
            Tensor of shape (B, T, d_model).
        """
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache must hold one DecoderCache per layer ({len(self.layers)}), got {len(cache)}"
            )
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache[i]
            x = layer(x, memory, self_mask=self_mask, memory_mask=memory_mask, cache=layer_cache)
        return self.norm(x)


class Transformer(nn.Module):
    """The encoder-decoder Transformer (Vaswani et al., 2017, figure 1).

    ``logits = lm_head(decoder(embed(tgt), encoder(embed(src))))`` with
    ``embed(x) = dropout(token_embedding(x) * sqrt(d_model) + PE[pos])``. The token embeddings
    are initialised with standard deviation ``d_model ** -0.5``, so that after the
    ``sqrt(d_model)`` scaling they have unit scale, like the positional encoding.

    Masks are derived from the tokens: keys equal to ``config.pad_id`` are masked out, and
    the decoder's self-attention is causal.

    Args:
        config: a :class:`TransformerConfig`.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.src_embed = nn.Embedding(config.src_vocab, config.d_model)
        self.tgt_embed = (
            self.src_embed
            if config.share_embeddings
            else nn.Embedding(config.tgt_vocab, config.d_model)
        )
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, std=config.d_model**-0.5)
        self.positional = SinusoidalEncoding(config.d_model, config.max_len, dropout=config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.lm_head = nn.Linear(config.d_model, config.tgt_vocab, bias=config.bias)
        if config.tie_embeddings:
            self.lm_head.weight = self.tgt_embed.weight

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """Token embedding scaled by sqrt(d_model), plus positions offset..offset+T-1."""
        x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T, d_model)
        return self.positional(x, offset=offset)

    def src_mask(self, src: Tensor) -> Tensor | None:
        """Padding mask of the source, (B, 1, 1, S), or None when ``pad_id`` is None."""
        return (
            None
            if self.config.pad_id is None
            else padding_mask_from_tokens(src, self.config.pad_id)
        )

    def tgt_mask(self, tgt: Tensor) -> Tensor:
        """Causal mask combined with the target's padding mask: (B, 1, T, T), or (T, T)."""
        causal = causal_mask(tgt.shape[1], device=tgt.device)  # (T, T)
        pad = self.src_mask(tgt)  # same rule for target tokens
        return causal if pad is None else causal & pad  # (B, 1, T, T)

    def new_cache(self) -> list[DecoderCache]:
        """An empty decoder cache for :meth:`decode`."""
        return self.decoder.new_cache()

    def encode(self, src: Tensor, *, src_mask: Tensor | None = None) -> Tensor:
        """Encode the source.

        Args:
            src: token ids of shape (B, S).
            src_mask: bool mask broadcastable to (B, H, S, S); default: from ``pad_id``.

        Returns:
            The memory, of shape (B, S, d_model).
        """
        _checks.token_ids(src, "src", self.config.src_vocab)
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        return self.encoder(self._embed(self.src_embed, src), mask=src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        *,
        memory_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: list[DecoderCache] | None = None,
        offset: int | None = None,
    ) -> Tensor:
        """Decode target tokens against the memory and return next-token logits.

        Without a cache, ``tgt`` is the whole prefix. With a cache (from :meth:`new_cache`),
        ``tgt`` holds only the new tokens; they sit at positions ``offset ..`` where
        ``offset`` defaults to the number of cached positions, so step t uses row t of the
        positional table. With a cache the default mask is causal only (decoding feeds
        unpadded prefixes).

        Args:
            tgt: token ids of shape (B, T).
            memory: encoder output of shape (B, S, d_model).
            memory_mask: bool cross-attention mask broadcastable to (B, H, T, S), usually
                ``src_mask(src)``; None attends to every source position.
            tgt_mask: bool self-attention mask broadcastable to (B, H, T, offset + T);
                default: causal (+ target padding when there is no cache).
            cache: decoder cache, updated in place.
            offset: position of the first token of ``tgt``; default: the cache length (or 0).

        Returns:
            Logits of shape (B, T, tgt_vocab).
        """
        _checks.token_ids(tgt, "tgt", self.config.tgt_vocab)
        cached = 0 if cache is None else cache[0].length
        offset = cached if offset is None else offset
        if tgt_mask is None and cache is None:
            tgt_mask = self.tgt_mask(tgt)  # (B, 1, T, T)
        elif tgt_mask is None:
            tgt_mask = causal_mask(tgt.shape[1], cached + tgt.shape[1], device=tgt.device)
        x = self._embed(self.tgt_embed, tgt, offset)  # (B, T, d_model)
        return self.lm_head(
            self.decoder(x, memory, self_mask=tgt_mask, memory_mask=memory_mask, cache=cache)
        )

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        *,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """Teacher-forced forward pass.

        Args:
            src: source token ids of shape (B, S).
            tgt: target input token ids of shape (B, T) (BOS + the target, shifted right).
            src_mask: bool encoder self-attention mask broadcastable to (B, H, S, S); default:
                from ``pad_id``. A padding mask with one query row, (B, 1, 1, S), also serves
                as cross-attention's mask when ``memory_mask`` is None; a mask with a query
                dimension (B, 1, S, S) does not, and needs ``memory_mask``.
            tgt_mask: bool decoder self-attention mask broadcastable to (B, H, T, T); default:
                causal + target padding. (Pass an all-True mask to watch the future leak.)
            memory_mask: bool cross-attention mask broadcastable to (B, H, T, S); default:
                ``src_mask`` when it has one query row, else the source's padding mask.

        Returns:
            Logits of shape (B, T, tgt_vocab).

        Raises:
            ValueError: if ``src_mask`` has a query dimension and ``memory_mask`` is None (an
                encoder's (S, S) structure would be applied to the decoder's T queries).
        """
        _checks.token_ids(src, "src", self.config.src_vocab)
        if src_mask is None:
            src_mask = self.src_mask(src)
        elif memory_mask is None and src_mask.dim() >= 2 and src_mask.shape[-2] > 1:
            raise ValueError(
                f"src_mask has shape {tuple(src_mask.shape)}: a query dimension of "
                f"{src_mask.shape[-2]} is the encoder's (S, S) mask and cannot be used by "
                "cross-attention, whose queries are the T target positions; pass memory_mask= "
                f"broadcastable to (B, H, T={tgt.shape[-1]}, S={src.shape[-1]}), e.g. "
                "model.src_mask(src) for the padding only"
            )
        memory_mask = src_mask if memory_mask is None else memory_mask
        memory = self.encode(src, src_mask=src_mask)  # (B, S, d_model)
        return self.decode(tgt, memory, memory_mask=memory_mask, tgt_mask=tgt_mask)

    #: The fields :meth:`from_torch` may set; every other field is fixed by the PyTorch model.
    FREE_FIELDS = ("max_len", "pad_id", "tie_embeddings", "share_embeddings")

    @classmethod
    def from_torch(
        cls, model: nn.Transformer, *, src_vocab: int, tgt_vocab: int, **overrides: Any
    ) -> Transformer:
        """A :class:`Transformer` whose encoder and decoder stacks are copies of ``model``'s.

        ``nn.Transformer`` has no embeddings and no output layer: those stay randomly
        initialised. It always ends both stacks with a LayerNorm, so ``final_norm=True``.

        Args:
            model: an ``nn.Transformer(batch_first=True)`` with relu or gelu activation.
            src_vocab: source vocabulary size.
            tgt_vocab: target vocabulary size.
            **overrides: the fields in :attr:`FREE_FIELDS`; any other field is fixed by
                ``model`` and raises a ValueError.

        Returns:
            The model, on ``model``'s device and dtype, in its mode (training or eval).

        Raises:
            TypeError: If ``model`` is not an ``nn.Transformer``.
            ValueError: If ``overrides`` name a field outside :attr:`FREE_FIELDS`, or the
                model has ``batch_first=False`` or another activation than relu or gelu.
        """
        if not isinstance(model, nn.Transformer):
            raise TypeError(f"model must be an nn.Transformer, got {type(model).__name__}")
        fixed = sorted(set(overrides) - set(cls.FREE_FIELDS))
        if fixed:
            raise ValueError(
                f"{fixed} are fixed by the PyTorch model; overrides may set only {list(cls.FREE_FIELDS)}"
            )
        config = _stack_config(
            model.encoder, "model.encoder", src_vocab=src_vocab, tgt_vocab=tgt_vocab, **overrides
        )
        config.num_decoder_layers = len(model.decoder.layers)
        ours = cls(config).to(next(model.parameters()))
        load_torch_layers(ours.encoder, model.encoder)
        load_torch_layers(ours.decoder, model.decoder)
        return ours.train(model.training)


def _check_decode_args(
    model: Transformer, src: Tensor, bos_id: int, eos_id: int, max_len: int, caller: str
) -> None:
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be an mtlib Transformer, got {type(model).__name__}")
    if model.training and _has_dropout(model):
        warnings.warn(
            f"{caller}: the model is in training mode with dropout, so its output is random "
            "(and usually worse); call model.eval() first",
            UserWarning,
            stacklevel=4,  # the caller of greedy_decode / beam_search (under torch.no_grad)
        )
    _checks.token_ids(src, "src", model.config.src_vocab)
    vocab = model.config.tgt_vocab
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
            raise ValueError(f"{name} must be an int in [0, tgt_vocab={vocab}), got {value!r}")
    if (
        isinstance(max_len, bool)
        or not isinstance(max_len, int)
        or not 1 <= max_len <= model.config.max_len
    ):
        raise ValueError(
            f"max_len must be an int in [1, config.max_len={model.config.max_len}], got {max_len!r}"
        )


def _has_dropout(model: nn.Module) -> bool:
    """Whether any dropout of ``model`` is active in training mode (a probability above 0)."""
    for module in model.modules():
        p = module.p if isinstance(module, nn.Dropout) else getattr(module, "dropout", None)
        if isinstance(p, float) and p > 0:
            return True
    return False


def _forbid_pad(logits: Tensor, model: Transformer) -> Tensor:
    """Logits (N, V) with the padding token made impossible.

    A generated pad would be a key that full recomputation masks out and cached decoding
    does not see as padding; forbidding it keeps the two paths identical (and a model should
    never emit padding anyway).
    """
    pad_id = model.config.pad_id
    if pad_id is None:
        return logits
    pad = torch.tensor([pad_id], device=logits.device)
    return logits.index_fill(-1, pad, float("-inf"))  # (N, V)


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    use_cache: bool = True,
) -> Tensor:
    """Generate by always taking the most likely next token.

    Call ``model.eval()`` first: in training mode with dropout the result is random (a
    ``UserWarning`` says so). ``pad_id`` is never
    generated; after a sequence emits ``eos_id`` it is padded with ``pad_id`` (or ``eos_id``
    if the config has none).

    Args:
        model: the :class:`Transformer`.
        src: source token ids of shape (B, S).
        bos_id: token that starts every target.
        eos_id: token that ends a target.
        max_len: maximum target length, BOS included.
        use_cache: decode one token per step with the KV cache; False recomputes the whole
            prefix at every step. Both give the same tokens.

    Returns:
        Token ids of shape (B, L), L <= max_len, starting with BOS.
    """
    _check_decode_args(model, src, bos_id, eos_id, max_len, "greedy_decode")
    fill = eos_id if model.config.pad_id is None else model.config.pad_id
    memory, memory_mask = model.encode(src), model.src_mask(src)  # (B, S, d), (B, 1, 1, S)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (B,)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len - 1):
        step_input = ys[:, -1:] if use_cache else ys  # (B, 1) or (B, t)
        logits = model.decode(step_input, memory, memory_mask=memory_mask, cache=cache)[
            :, -1
        ]  # (B, V)
        next_token = _forbid_pad(logits, model).argmax(dim=-1).masked_fill(done, fill)  # (B,)
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # (B, t + 1)
        done |= next_token == eos_id
        if done.all():
            break
    return ys


def _length_penalty(length: Tensor, alpha: float) -> Tensor:
    """GNMT's length penalty ``((5 + |Y|) / 6) ** alpha`` (Wu et al., 2016)."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    use_cache: bool = True,
) -> Tensor:
    """Beam search: keep the ``beam_size`` most likely prefixes of each source (batched).

    Every step extends each beam by every token and keeps the ``beam_size`` best sums of
    log-probabilities. A beam that has emitted EOS is frozen: it can only be extended by
    padding, at no cost, so it keeps its score and its slot. The search stops when every
    beam is finished or at ``max_len``; the winner maximises
    ``log p(Y) / ((5 + |Y|) / 6) ** length_penalty`` (GNMT; the paper uses 4 beams and 0.6),
    where ``|Y|`` counts the generated tokens, EOS included.

    Args:
        model: the :class:`Transformer`, in eval mode.
        src: source token ids of shape (B, S).
        bos_id: token that starts every target.
        eos_id: token that ends a target.
        max_len: maximum target length, BOS included.
        beam_size: number of beams K per source.
        length_penalty: alpha; 0 ranks by raw log-probability.
        use_cache: decode one token per step with the KV cache (reordered as beams move).

    Returns:
        Token ids of shape (B, L), L <= max_len, starting with BOS, padded after EOS.
    """
    _check_decode_args(model, src, bos_id, eos_id, max_len, "beam_search")
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    batch, k = src.shape[0], beam_size
    fill = eos_id if model.config.pad_id is None else model.config.pad_id
    rows = torch.arange(batch, device=src.device).repeat_interleave(k)  # (B*K,) source of each beam
    memory, memory_mask = model.encode(src)[rows], model.src_mask(src[rows])  # (B*K, S, d)
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=src.device)  # (B*K, 1)
    scores = torch.full((batch, k), float("-inf"), device=src.device)  # (B, K)
    scores[:, 0] = 0.0  # all beams start equal: expand only the first at step 1
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len - 1):
        log_probs = _beam_step(model, ys, memory, memory_mask, cache, eos_id, fill)  # (B*K, V)
        vocab = log_probs.shape[-1]
        total = scores[:, :, None] + log_probs.view(batch, k, vocab)  # (B, K, V)
        scores, flat = total.view(batch, k * vocab).topk(k, dim=-1)  # (B, K) each
        first_row = torch.arange(batch, device=src.device)[:, None] * k  # (B, 1)
        parent = (first_row + flat // vocab).view(-1)  # (B*K,) row each new beam extends
        next_token = (flat % vocab).view(-1, 1)  # (B*K, 1)
        ys = torch.cat([ys[parent], next_token], dim=1)  # (B*K, t + 1)
        if cache is not None:
            for layer_cache in cache:
                layer_cache.reorder(parent)
        if (ys[:, 1:] == eos_id).any(dim=1).all():  # every beam has finished
            break
    return _best_beams(ys, scores, eos_id, length_penalty)


def _beam_step(
    model: Transformer,
    ys: Tensor,
    memory: Tensor,
    memory_mask: Tensor | None,
    cache: list[DecoderCache] | None,
    eos_id: int,
    fill: int,
) -> Tensor:
    """Next-token log-probabilities (B*K, V); finished beams may only emit ``fill`` at cost 0."""
    step_input = ys[:, -1:] if cache is not None else ys  # (B*K, 1) or (B*K, t)
    logits = model.decode(step_input, memory, memory_mask=memory_mask, cache=cache)[
        :, -1
    ]  # (B*K, V)
    log_probs = _forbid_pad(logits.float(), model).log_softmax(dim=-1)  # (B*K, V)
    finished = (ys[:, 1:] == eos_id).any(dim=1)  # (B*K,)
    frozen = torch.full_like(log_probs, float("-inf"))
    frozen[:, fill] = 0.0
    return torch.where(finished[:, None], frozen, log_probs)  # (B*K, V)


def _best_beams(ys: Tensor, scores: Tensor, eos_id: int, alpha: float) -> Tensor:
    """Pick the beam with the best length-normalised score for each source: (B, L).

    ``|Y|`` counts the generated tokens up to the first EOS, EOS included (transformers' beam
    search counts the same: ``cur_len + 1 - decoder_prompt_len`` when a beam emits EOS), or all
    ``L - 1`` of an unfinished beam.
    """
    batch, k = scores.shape
    is_eos = ys[:, 1:] == eos_id  # (B*K, L-1)
    first_eos = torch.where(is_eos.any(dim=1), is_eos.float().argmax(dim=1) + 1, ys.shape[1] - 1)
    lengths = first_eos.view(batch, k).to(scores.dtype)  # (B, K) generated tokens incl. EOS
    best = (scores / _length_penalty(lengths, alpha)).argmax(dim=1)  # (B,)
    return ys.view(batch, k, -1)[torch.arange(batch, device=ys.device), best]  # (B, L)
