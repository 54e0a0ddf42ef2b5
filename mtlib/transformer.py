"""The encoder-decoder Transformer of Vaswani et al. (2017), and how to decode with it.

- :class:`TransformerConfig`: every size in one dataclass, with presets.
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

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from mtlib.blocks import (
    ACTIVATIONS,
    DECODER_LAYER_PAIRS,
    ENCODER_LAYER_PAIRS,
    DecoderBlock,
    DecoderCache,
    EncoderBlock,
    copy_weights,
    torch_layer_config,
)
from mtlib.masks import causal_mask, combine, padding_mask_from_tokens
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
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer.

    The defaults are the paper's base model (:meth:`base`); :meth:`tiny` is the size the
    book trains on a CPU.
    """

    src_vocab: int = 1000  # source vocabulary size
    tgt_vocab: int = 1000  # target vocabulary size
    d_model: int = 512  # model width (must be even: sinusoidal positions)
    num_heads: int = 8  # attention heads h; d_model % h == 0
    num_encoder_layers: int = 6  # N encoder blocks
    num_decoder_layers: int = 6  # N decoder blocks
    d_ff: int = 2048  # feed-forward hidden width
    dropout: float = 0.1  # on embeddings+positions, attention weights, FF hidden, residuals
    max_len: int = 512  # longest sequence the positional table covers
    norm_first: bool = False  # False: Post-LN (the paper); True: Pre-LN
    activation: str = "relu"  # "relu", "gelu" or "swiglu"
    layer_norm_eps: float = 1e-5  # LayerNorm epsilon (PyTorch's default)
    bias: bool = True  # biases in linear layers and LayerNorms
    final_norm: bool | None = None  # LayerNorm after each stack; None: only if norm_first
    pad_id: int | None = 0  # padding token id, masked out of attention; None: no padding
    tie_embeddings: bool = False  # share the target embedding with the output projection

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads != 0:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        for name in ("src_vocab", "tgt_vocab", "d_model", "num_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def use_final_norm(self) -> bool:
        """Whether the stacks end with a LayerNorm (Pre-LN needs one; Post-LN already has one)."""
        return self.norm_first if self.final_norm is None else self.final_norm

    @classmethod
    def base(cls, **overrides: object) -> TransformerConfig:
        """The paper's base model: d_model 512, 8 heads, 6+6 layers, d_ff 2048, dropout 0.1."""
        return replace(cls(), **overrides)

    @classmethod
    def tiny(cls, **overrides: object) -> TransformerConfig:
        """A model that trains in seconds on a CPU: d_model 32, 4 heads, 2+2 layers."""
        small = cls(src_vocab=16, tgt_vocab=16, d_model=32, num_heads=4, num_encoder_layers=2,
                    num_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)  # fmt: skip
        return replace(small, **overrides)


def _block_kwargs(config: TransformerConfig) -> dict:
    """Constructor arguments shared by every block of ``config``."""
    return {
        "d_model": config.d_model,
        "num_heads": config.num_heads,
        "d_ff": config.d_ff,
        "dropout": config.dropout,
        "activation": config.activation,
        "norm_first": config.norm_first,
        "layer_norm_eps": config.layer_norm_eps,
        "bias": config.bias,
    }


def _final_norm(config: TransformerConfig) -> nn.Module:
    if not config.use_final_norm:
        return nn.Identity()
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)


def _config_from_torch_stack(stack: nn.TransformerEncoder | nn.TransformerDecoder) -> TransformerConfig:
    """A config matching the layers of a PyTorch stack (vocabularies left at their defaults)."""
    kw = torch_layer_config(stack.layers[0])
    n = len(stack.layers)
    return TransformerConfig(
        num_heads=kw["num_heads"], d_model=kw["d_model"], d_ff=kw["d_ff"], dropout=kw["dropout"],
        activation=kw["activation"], norm_first=kw["norm_first"],
        layer_norm_eps=kw["layer_norm_eps"], bias=kw["bias"], final_norm=stack.norm is not None,
        num_encoder_layers=n, num_decoder_layers=n,
    )  # fmt: skip


def _stack_pairs(layer_pairs: list, num_layers: int, has_norm: bool) -> list:
    """Name pairs of a whole stack: ``layers.{i}.`` + each layer pair, then ``norm``."""
    pairs = [(f"layers.{i}.{o}", f"layers.{i}.{t}", c) for i in range(num_layers)
             for o, t, c in layer_pairs]  # fmt: skip
    if has_norm:
        pairs += [("norm.weight", "norm.weight", None), ("norm.bias", "norm.bias", None)]
    return pairs


class Encoder(nn.Module):
    """A stack of encoder blocks, then (if ``config.use_final_norm``) a LayerNorm.

    Args:
        config: sizes; uses ``num_encoder_layers`` and the block settings.

    Shape:
        forward: x (B, S, d_model) -> (B, S, d_model).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        kwargs = _block_kwargs(config)
        self.layers = nn.ModuleList(EncoderBlock(**kwargs) for _ in range(config.num_encoder_layers))
        self.norm = _final_norm(config)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Run every block, then the final norm.

        Args:
            x: embedded source of shape (B, S, d_model).
            mask: attention mask broadcastable to (B, H, S, S), e.g. padding (B, 1, 1, S).

        Returns:
            The memory, of shape (B, S, d_model).
        """
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)

    @classmethod
    def from_torch(cls, stack: nn.TransformerEncoder) -> Encoder:
        """Build an :class:`Encoder` with the weights of an ``nn.TransformerEncoder``.

        Args:
            stack: a PyTorch encoder of ``batch_first=True`` layers (``stack.norm`` may be None).

        Returns:
            An encoder on the stack's device and dtype computing the same function.
        """
        config = _config_from_torch_stack(stack)
        encoder = cls(config).to(stack.layers[0].linear1.weight)
        pairs = _stack_pairs(ENCODER_LAYER_PAIRS, len(stack.layers), stack.norm is not None)
        copy_weights(encoder, dict(stack.named_parameters()), pairs)
        return encoder


class Decoder(nn.Module):
    """A stack of decoder blocks, then (if ``config.use_final_norm``) a LayerNorm.

    Args:
        config: sizes; uses ``num_decoder_layers`` and the block settings.

    Shape:
        forward: x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        kwargs = _block_kwargs(config)
        self.layers = nn.ModuleList(DecoderBlock(**kwargs) for _ in range(config.num_decoder_layers))
        self.norm = _final_norm(config)

    def new_cache(self) -> list[DecoderCache]:
        """An empty cache: one :class:`~mtlib.blocks.DecoderCache` per block."""
        return [DecoderCache() for _ in self.layers]

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Run every block, then the final norm.

        Args:
            x: embedded target of shape (B, T, d_model) (only the new positions with a cache).
            memory: encoder output of shape (B, S, d_model).
            self_mask: self-attention mask broadcastable to (B, H, T, t + T), t cached.
            memory_mask: cross-attention mask broadcastable to (B, H, T, S).
            cache: from :meth:`new_cache`, updated in place.

        Returns:
            Tensor of shape (B, T, d_model).
        """
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(f"cache must hold one DecoderCache per layer ({len(self.layers)}), "
                             f"got {len(cache)}")  # fmt: skip
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, memory_mask, None if cache is None else cache[i])
        return self.norm(x)

    @classmethod
    def from_torch(cls, stack: nn.TransformerDecoder) -> Decoder:
        """Build a :class:`Decoder` with the weights of an ``nn.TransformerDecoder``.

        Args:
            stack: a PyTorch decoder of ``batch_first=True`` layers (``stack.norm`` may be None).

        Returns:
            A decoder on the stack's device and dtype computing the same function.
        """
        config = _config_from_torch_stack(stack)
        decoder = cls(config).to(stack.layers[0].linear1.weight)
        pairs = _stack_pairs(DECODER_LAYER_PAIRS, len(stack.layers), stack.norm is not None)
        copy_weights(decoder, dict(stack.named_parameters()), pairs)
        return decoder


def _check_tokens(tokens: object, name: str, vocab: int) -> None:
    """Check that ``tokens`` is an integer tensor of shape (B, T) with ids below ``vocab``."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a Tensor of token ids, shape (batch, seq_len), "
                        f"got {type(tokens).__name__}")  # fmt: skip
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}")
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must have shape (batch, seq_len >= 1), got {tuple(tokens.shape)}")
    if tokens.min() < 0 or tokens.max() >= vocab:
        raise ValueError(f"{name} ids must lie in [0, {vocab}), got range "
                         f"[{int(tokens.min())}, {int(tokens.max())}]")  # fmt: skip


class Transformer(nn.Module):
    """The encoder-decoder Transformer (Vaswani et al., 2017, figure 1).

    ``logits = lm_head(decoder(embed(tgt), encoder(embed(src))))`` with
    ``embed(x) = dropout(token_embedding(x) * sqrt(d_model) + PE[pos])``.

    Masks are derived from the tokens: keys equal to ``config.pad_id`` are masked out, and
    the decoder's self-attention is causal.

    Args:
        config: a :class:`TransformerConfig`.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.src_embed = nn.Embedding(config.src_vocab, config.d_model)
        self.tgt_embed = nn.Embedding(config.tgt_vocab, config.d_model)
        self.positional = SinusoidalEncoding(config.d_model, config.max_len, config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.lm_head = nn.Linear(config.d_model, config.tgt_vocab)
        if config.tie_embeddings:
            self.lm_head.weight = self.tgt_embed.weight

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """Token embedding scaled by sqrt(d_model), plus positions offset..offset+T-1."""
        x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T, d_model)
        return self.positional(x, offset=offset)

    def src_mask(self, src: Tensor) -> Tensor | None:
        """Padding mask of the source, (B, 1, 1, S), or None when ``pad_id`` is None."""
        return None if self.config.pad_id is None else padding_mask_from_tokens(src, self.config.pad_id)

    def tgt_mask(self, tgt: Tensor) -> Tensor:
        """Causal mask combined with the target's padding mask: (B, 1, T, T) or (T, T)."""
        pad = self.src_mask(tgt)  # same rule for target tokens
        return combine(causal_mask(tgt.shape[1], device=tgt.device), pad)

    def new_cache(self) -> list[DecoderCache]:
        """An empty decoder cache for :meth:`decode`."""
        return self.decoder.new_cache()

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Encode the source.

        Args:
            src: token ids of shape (B, S).
            src_mask: mask broadcastable to (B, H, S, S); default: from ``pad_id``.

        Returns:
            The memory, of shape (B, S, d_model).
        """
        _check_tokens(src, "src", self.config.src_vocab)
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        return self.encoder(self._embed(self.src_embed, src), src_mask)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
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
            memory_mask: cross-attention mask broadcastable to (B, H, T, S), usually
                ``src_mask(src)``; None attends to every source position.
            tgt_mask: self-attention mask broadcastable to (B, H, T, offset + T); default:
                causal (+ target padding when there is no cache).
            cache: decoder cache, updated in place.
            offset: position of the first token of ``tgt``; default: the cache length (or 0).

        Returns:
            Logits of shape (B, T, tgt_vocab).
        """
        _check_tokens(tgt, "tgt", self.config.tgt_vocab)
        cached = 0 if cache is None else cache[0].length
        offset = cached if offset is None else offset
        if tgt_mask is None and cache is None:
            tgt_mask = self.tgt_mask(tgt)  # (B, 1, T, T)
        elif tgt_mask is None:
            tgt_mask = causal_mask(tgt.shape[1], cached + tgt.shape[1], device=tgt.device)
        x = self._embed(self.tgt_embed, tgt, offset)  # (B, T, d_model)
        return self.lm_head(self.decoder(x, memory, tgt_mask, memory_mask, cache))

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        """Teacher-forced forward pass.

        Args:
            src: source token ids of shape (B, S).
            tgt: target input token ids of shape (B, T) (BOS + the target, shifted right).
            src_mask: source padding mask broadcastable to (B, H, S, S), used by the encoder
                and by cross-attention; default: from ``pad_id``.
            tgt_mask: decoder self-attention mask broadcastable to (B, H, T, T); default:
                causal + target padding. (Pass an all-True mask to watch the future leak.)

        Returns:
            Logits of shape (B, T, tgt_vocab).
        """
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        memory = self.encode(src, src_mask)  # (B, S, d_model)
        return self.decode(tgt, memory, src_mask, tgt_mask)

    @classmethod
    def from_torch(
        cls, model: nn.Transformer, src_vocab: int, tgt_vocab: int, **overrides: object
    ) -> Transformer:
        """A :class:`Transformer` whose encoder and decoder stacks are copies of ``model``'s.

        ``nn.Transformer`` has no embeddings and no output layer: those stay randomly
        initialised. It always ends both stacks with a LayerNorm, so ``final_norm=True``.

        Args:
            model: an ``nn.Transformer(batch_first=True)`` with relu or gelu activation.
            src_vocab: source vocabulary size.
            tgt_vocab: target vocabulary size.
            **overrides: other :class:`TransformerConfig` fields (``pad_id``, ``max_len``, ...).

        Returns:
            The model, on ``model``'s device and dtype.
        """
        if not isinstance(model, nn.Transformer):
            raise TypeError(f"model must be an nn.Transformer, got {type(model).__name__}")
        enc_config = _config_from_torch_stack(model.encoder)
        config = replace(enc_config, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                         num_decoder_layers=len(model.decoder.layers), **overrides)  # fmt: skip
        ours = cls(config).to(model.encoder.layers[0].linear1.weight)
        ours.encoder = Encoder.from_torch(model.encoder)
        ours.decoder = Decoder.from_torch(model.decoder)
        return ours


def _check_decode_args(src: Tensor, max_len: int, model: Transformer) -> None:
    _check_tokens(src, "src", model.config.src_vocab)
    if not 1 <= max_len <= model.config.max_len:
        raise ValueError(f"max_len must lie in [1, config.max_len={model.config.max_len}], got {max_len}")


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
    bos_id: int,
    eos_id: int,
    max_len: int,
    use_cache: bool = True,
) -> Tensor:
    """Generate by always taking the most likely next token.

    Call ``model.eval()`` first (dropout would make the result random). ``pad_id`` is never
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
    _check_decode_args(src, max_len, model)
    fill = eos_id if model.config.pad_id is None else model.config.pad_id
    memory, memory_mask = model.encode(src), model.src_mask(src)  # (B, S, d), (B, 1, 1, S)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (B,)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len - 1):
        step_input = ys[:, -1:] if use_cache else ys  # (B, 1) or (B, t)
        logits = model.decode(step_input, memory, memory_mask, cache=cache)[:, -1]  # (B, V)
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
    _check_decode_args(src, max_len, model)
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
    logits = model.decode(step_input, memory, memory_mask, cache=cache)[:, -1]  # (B*K, V)
    log_probs = _forbid_pad(logits.float(), model).log_softmax(dim=-1)  # (B*K, V)
    finished = (ys[:, 1:] == eos_id).any(dim=1)  # (B*K,)
    frozen = torch.full_like(log_probs, float("-inf"))
    frozen[:, fill] = 0.0
    return torch.where(finished[:, None], frozen, log_probs)  # (B*K, V)


def _best_beams(ys: Tensor, scores: Tensor, eos_id: int, alpha: float) -> Tensor:
    """Pick the beam with the best length-normalised score for each source: (B, L)."""
    batch, k = scores.shape
    is_eos = ys[:, 1:] == eos_id  # (B*K, L-1)
    first_eos = torch.where(is_eos.any(dim=1), is_eos.float().argmax(dim=1) + 1, ys.shape[1] - 1)
    lengths = first_eos.view(batch, k).to(scores.dtype)  # (B, K) generated tokens incl. EOS
    best = (scores / _length_penalty(lengths, alpha)).argmax(dim=1)  # (B,)
    return ys.view(batch, k, -1)[torch.arange(batch, device=ys.device), best]  # (B, L)
