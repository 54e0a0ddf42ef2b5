"""BART: a denoising sequence-to-sequence autoencoder (Lewis et al., 2020).

BART is the encoder-decoder of chapter 8, pretrained to reconstruct text from a corrupted
copy. The architecture is nearly the 2017 Transformer's, with BERT/GPT-era choices, each
named where it is made below:

- **learned absolute positions** (like BERT and GPT-2), one table per stack, read with
  Hugging Face's **offset of 2**: position ``p`` uses row ``p + 2`` (a fairseq legacy: the
  first two rows were reserved for padding), so the table has ``max_position_embeddings + 2``
  rows;
- a **LayerNorm on the embeddings** (``layernorm_embedding``), after adding the positions;
- **post-norm blocks** (``x = norm(x + dropout(sublayer(x)))``, as in the 2017 paper) with the
  **exact GELU** and **biases everywhere**: mtlib's :class:`~mtlib.blocks.EncoderBlock` and
  :class:`~mtlib.blocks.DecoderBlock` with ``norm_first=False, activation="gelu"``;
- optional **embedding scaling** by ``sqrt(d_model)`` (``scale_embedding``; off in
  bart-base/large, on in some descendants);
- one **shared token embedding** for encoder and decoder, and the **LM head tied to it**, plus
  a vector ``final_logits_bias`` added to the logits (a buffer, zero in the released models).

The encoder and decoder may have different numbers of heads and feed-forward widths; each
stack gets a :class:`~mtlib.blocks.BlockConfig` of its own.

Dropout: BART drops the embeddings and every residual branch (``dropout``) and, with separate
rates that are 0 in bart-base, the attention weights and the feed-forward hidden units. mtlib's
blocks use one rate for all of them, so outputs are equal in eval mode only.

Names follow Hugging Face's inside the stacks where mtlib's blocks allow (``self_attn.q_proj``
is the same), so :meth:`BART.from_hf` is the short table :data:`HF_RENAMES`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from mtlib import _checks
from mtlib.blocks import BlockConfig, DecoderBlock, DecoderCache, EncoderBlock
from mtlib.masks import causal_mask
from mtlib.models import _seq2seq
from mtlib.models.bert import attention_mask_to_bool

__all__ = ["BARTConfig", "BART", "BARTEncoder", "BARTDecoder", "shift_tokens_right", "HF_RENAMES"]

#: Hugging Face's ``activation_function`` names and mtlib's :data:`~mtlib.blocks.ACTIVATIONS`.
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh"}

#: Row of the position table that position 0 reads (Hugging Face's BartLearnedPositionalEmbedding).
POSITION_OFFSET = 2

#: Hugging Face BART names that differ from ours, as (theirs, ours) pairs; the first match wins.
#: The decoder's ``final_layer_norm`` (its third norm) is first renamed ``norm3`` by
#: ``_hf_names``: in the encoder the same name is the second norm.
HF_RENAMES: list[tuple[str, str]] = [
    ("self_attn_layer_norm", "norm1"),
    ("encoder_attn_layer_norm", "norm2"),
    ("final_layer_norm", "norm2"),
    ("encoder_attn", "cross_attn"),
    ("fc1", "ff.linear1"),
    ("fc2", "ff.linear2"),
]


@dataclass
class BARTConfig:
    """Sizes and switches of a BART. The defaults are facebook/bart-base (:meth:`base`)."""

    vocab_size: int = 50265  # token ids: GPT-2's byte-level BPE in fairseq's dictionary
    d_model: int = 768  # model width
    encoder_layers: int = 6  # encoder blocks
    decoder_layers: int = 6  # decoder blocks
    encoder_attention_heads: int = 12  # heads of the encoder's self-attention
    decoder_attention_heads: int = 12  # heads of the decoder's self- and cross-attention
    encoder_ffn_dim: int = 3072  # encoder feed-forward hidden width
    decoder_ffn_dim: int = 3072  # decoder feed-forward hidden width
    max_position_embeddings: int = 1024  # longest sequence (the tables have 2 more rows)
    dropout: float = 0.1  # on embeddings, residual branches (and, in mtlib, attention/hidden)
    activation_function: str = "gelu"  # "gelu" (exact, BART), "relu" or "gelu_new" (tanh)
    scale_embedding: bool = False  # multiply token embeddings by sqrt(d_model)
    pad_token_id: int = 1  # <pad>; finished rows are filled with it by generate
    bos_token_id: int = 0  # <s>, the first token of an encoder input
    eos_token_id: int = 2  # </s>
    decoder_start_token_id: int = 2  # first decoder input (BART starts from </s>)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "encoder_layers", "decoder_layers",
                     "max_position_embeddings"):  # fmt: skip
            _checks.positive_int(getattr(self, name), name)
        if self.activation_function not in _ACTIVATIONS:
            raise ValueError(
                f"activation_function must be one of {sorted(_ACTIVATIONS)}, got "
                f"{self.activation_function!r}"
            )
        for part in ("encoder", "decoder"):
            heads = _checks.positive_int(getattr(self, f"{part}_attention_heads"), f"{part}_attention_heads")  # fmt: skip
            _checks.positive_int(getattr(self, f"{part}_ffn_dim"), f"{part}_ffn_dim")
            if self.d_model % heads != 0:
                raise ValueError(
                    f"d_model={self.d_model} must be divisible by {part}_attention_heads={heads}"
                )
        _checks.probability(self.dropout, "dropout")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:  # fmt: skip
                raise ValueError(
                    f"{name} must be an int in [0, vocab_size={self.vocab_size}), got {value!r}"
                )

    def block_config(self, part: str) -> BlockConfig:
        """The settings of every block of one stack (``part`` "encoder" or "decoder"):
        post-norm (``norm_first=False``), biases, LayerNorm epsilon 1e-5."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=getattr(self, f"{part}_attention_heads"),
            d_ff=getattr(self, f"{part}_ffn_dim"),
            dropout=self.dropout,
            activation=_ACTIVATIONS[self.activation_function],
            norm_first=False,  # post-norm, as the 2017 paper
            layer_norm_eps=1e-5,
            bias=True,
        )

    @classmethod
    def base(cls, **overrides: Any) -> BARTConfig:
        """facebook/bart-base (Lewis et al., 2020): 6 + 6 layers, d_model 768, 12 heads,
        d_ff 3072, 1024 positions, 50265 ids; 139,420,416 parameters."""
        return replace(cls(), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> BARTConfig:
        """A BART that trains on a CPU in a minute: 2 + 2 layers, d_model 64, 4 heads, d_ff 128,
        128 positions, 128 ids, no dropout (override ``vocab_size`` for your tokenizer)."""
        small = cls(vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                    decoder_ffn_dim=128, max_position_embeddings=128, dropout=0.0)  # fmt: skip
        return replace(small, **overrides)


def shift_tokens_right(labels: Tensor, pad_token_id: int, decoder_start_token_id: int) -> Tensor:
    """Decoder inputs for teacher forcing, as Hugging Face's ``shift_tokens_right``.

    ``[start, y_0, ..., y_{T-2}]``: the labels moved one place right after the start token,
    with the loss's ignore value -100 replaced by ``pad_token_id``.

    Args:
        labels: (B, T) long; -100 marks positions the loss skips.
        pad_token_id: what -100 becomes.
        decoder_start_token_id: the first decoder input.

    Returns:
        (B, T) long.
    """
    if not isinstance(labels, Tensor) or labels.dim() != 2 or labels.dtype.is_floating_point:
        got = f"{labels.dtype} {tuple(labels.shape)}" if isinstance(labels, Tensor) else type(labels).__name__  # fmt: skip
        raise ValueError(f"labels must be an integer tensor of shape (batch, T), got {got}")
    shifted = labels.new_empty(labels.shape)  # (B, T)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


class _Embed(nn.Module):
    """What both stacks do first: token embedding (scaled), plus learned positions read with
    the offset of 2, then LayerNorm and dropout."""

    def __init__(self, config: BARTConfig) -> None:
        super().__init__()
        rows = config.max_position_embeddings + POSITION_OFFSET
        self.embed_positions = nn.Embedding(rows, config.d_model)  # row p + 2 for position p
        self.layernorm_embedding = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.max_positions = config.max_position_embeddings

    def embed(self, tokens: Tensor, past: int = 0) -> Tensor:
        """Token embeddings (B, T, d_model) of positions ``past .. past + T - 1`` -> (B, T, d_model)."""
        length = tokens.shape[1]
        positions = torch.arange(past, past + length, device=tokens.device)  # (T,)
        x = tokens + self.embed_positions(positions + POSITION_OFFSET)  # (B, T, d_model)
        return self.dropout(self.layernorm_embedding(x))


class BARTEncoder(_Embed):
    """Embeddings, then post-norm :class:`~mtlib.blocks.EncoderBlock` s (no final norm).

    Args:
        config: a :class:`BARTConfig`.
    """

    def __init__(self, config: BARTConfig) -> None:
        super().__init__(config)
        block = config.block_config("encoder")
        self.layers = nn.ModuleList(EncoderBlock(block) for _ in range(config.encoder_layers))

    def forward(self, tokens: Tensor, *, mask: Tensor | None = None) -> Tensor:
        """Token embeddings (B, T, d_model) -> memory (B, T, d_model); ``mask`` (B, 1, 1, T)."""
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, mask=mask)
        return x


class BARTDecoder(_Embed):
    """Embeddings, then post-norm :class:`~mtlib.blocks.DecoderBlock` s (no final norm).

    Args:
        config: a :class:`BARTConfig`.
    """

    def __init__(self, config: BARTConfig) -> None:
        super().__init__(config)
        block = config.block_config("decoder")
        self.layers = nn.ModuleList(DecoderBlock(block) for _ in range(config.decoder_layers))

    def forward(
        self,
        tokens: Tensor,
        memory: Tensor,
        *,
        memory_mask: Tensor | None = None,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Token embeddings (B, T, d_model) -> hidden states (B, T, d_model).

        Args:
            tokens: embedded decoder tokens; with a cache, only the new positions.
            memory: encoder output (B, T_enc, d_model).
            memory_mask: bool (B, 1, 1, T_enc), True = token.
            cache: one :class:`~mtlib.blocks.DecoderCache` per layer, updated in place.
        """
        past = 0 if cache is None else cache[0].length  # positions already decoded
        length = tokens.shape[1]
        x = self.embed(tokens, past)
        self_mask = causal_mask(length, past + length, device=x.device)  # (T, past + T)
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask=self_mask, memory_mask=memory_mask,
                      cache=None if cache is None else cache[i])  # fmt: skip
        return x


class BART(nn.Module):
    """BART for conditional generation:
    ``logits = decoder(shared[y], encoder(shared[x])) @ shared^T + final_logits_bias``.

    Args:
        config: a :class:`BARTConfig`.

    Shape:
        forward: input_ids (B, T_enc), decoder_input_ids (B, T_dec) -> logits (B, T_dec, vocab).
    """

    final_logits_bias: Tensor

    def __init__(self, config: BARTConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.shared = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_token_id)
        self.embed_scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0
        self.encoder = BARTEncoder(c)
        self.decoder = BARTDecoder(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.shared.weight  # tied: one (vocab_size, d_model) matrix
        self.register_buffer("final_logits_bias", torch.zeros(1, c.vocab_size))  # (1, V)
        self.apply(self._init_weights)
        # apply() visits lm_head after shared, and lm_head.weight IS shared.weight: its normal_
        # re-fills the padding row, so zero it once more, last (as Hugging Face's BART ends up)
        self._zero_padding_row()

    def _init_weights(self, module: nn.Module) -> None:
        """BART's initialisation: normal(0, 0.02) weights and embeddings, zero biases and
        padding row, LayerNorms at (1, 0). (The padding row is zeroed again after ``apply``, see
        ``__init__``; with the head tied, training still updates it through the logits.)"""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()

    def _zero_padding_row(self) -> None:
        """Zero the padding row of the shared embedding (and so of the tied head)."""
        with torch.no_grad():
            self.shared.weight[self.config.pad_token_id].zero_()

    def num_parameters(self) -> int:
        """Number of parameters (the tied head counted once; ``final_logits_bias`` is a buffer)."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self) -> list[DecoderCache]:
        """An empty cache for :meth:`decode`: one :class:`~mtlib.blocks.DecoderCache` per
        decoder layer (self-attention keys/values grow; the encoder memory is projected once)."""
        return [DecoderCache() for _ in self.decoder.layers]

    def _tokens(self, ids: Tensor, name: str, past: int = 0) -> Tensor:
        """Check ids (B, T) and their positions; return the scaled embeddings (B, T, d_model)."""
        c = self.config
        _checks.token_ids(ids, name, c.vocab_size)
        if past + ids.shape[1] > c.max_position_embeddings:
            raise ValueError(
                f"{name} has {ids.shape[1]} tokens after {past} cached ones; positions must stay "
                f"below max_position_embeddings={c.max_position_embeddings}"
            )
        return self.shared(ids) * self.embed_scale  # (B, T, d_model)

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Run the encoder.

        Args:
            input_ids: token ids (B, T_enc), each in [0, vocab_size).
            attention_mask: Hugging Face's convention, (B, T_enc), 1 = token, 0 = padding.

        Returns:
            The memory, (B, T_enc, d_model).
        """
        tokens = self._tokens(input_ids, "input_ids")
        mask = attention_mask_to_bool(
            attention_mask, input_ids, length="T_enc"
        )  # (B, 1, 1, T_enc) or None
        return self.encoder(tokens, mask=mask)  # (B, T_enc, d_model)

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        attention_mask: Tensor | None = None,
        *,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Run the decoder and the LM head.

        Args:
            decoder_input_ids: token ids (B, T_dec); with a cache, only the new tokens.
            memory: the encoder output (B, T_enc, d_model).
            attention_mask: the encoder's mask (B, T_enc), 1 = token, 0 = padding.
            cache: from :meth:`new_cache`, updated in place.

        Returns:
            Logits (B, T_dec, vocab_size).
        """
        cache = _seq2seq.check_cache(cache, len(self.decoder.layers))
        past = 0 if cache is None else cache[0].length
        tokens = self._tokens(decoder_input_ids, "decoder_input_ids", past)
        memory = _seq2seq.check_memory(memory, decoder_input_ids.shape[0], self.config.d_model)
        source = memory.new_zeros(memory.shape[:2], dtype=torch.long)  # (B, T_enc) for the shape
        memory_mask = attention_mask_to_bool(
            attention_mask, source, length="T_enc"
        )  # (B, 1, 1, T_enc) or None
        y = self.decoder(tokens, memory, memory_mask=memory_mask, cache=cache)  # (B, T, d_model)
        return self.lm_head(y) + self.final_logits_bias  # (B, T_dec, vocab_size)

    def forward(
        self, input_ids: Tensor, decoder_input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> Tensor:
        """Logits of every decoder position (teacher forcing).

        Args:
            input_ids: encoder token ids (B, T_enc).
            decoder_input_ids: decoder token ids (B, T_dec), usually
                :func:`shift_tokens_right` of the labels.
            attention_mask: (B, T_enc), 1 = token, 0 = padding (Hugging Face's convention).

        Returns:
            Logits (B, T_dec, vocab_size).
        """
        _checks.token_ids(decoder_input_ids, "decoder_input_ids", self.config.vocab_size)
        _checks.token_ids(input_ids, "input_ids", self.config.vocab_size)
        _seq2seq.check_same_batch(input_ids, decoder_input_ids)
        memory = self.encode(input_ids, attention_mask)  # (B, T_enc, d_model)
        return self.decode(decoder_input_ids, memory, attention_mask)

    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        attention_mask: Tensor | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        *,
        use_cache: bool = True,
    ) -> Tensor:
        """Decode from ``decoder_start_token_id``, one token at a time, in eval mode.

        Greedy (``do_sample=False``) gives the tokens of ``transformers``' ``generate`` with
        ``num_beams=1`` and none of its forced or minimum-length tokens: a row that has emitted
        ``eos_token_id`` is filled with ``pad_token_id``, and decoding stops early when every
        row has finished.

        Args:
            input_ids: encoder token ids (B, T_enc).
            max_new_tokens: at most this many tokens after the start token, >= 0; with the
                start token they must fit in ``max_position_embeddings``.
            attention_mask: (B, T_enc), 1 = token, 0 = padding.
            do_sample: draw from the softmax instead of taking the argmax.
            temperature: > 0, divides the logits.
            top_k: keep only the k most likely tokens (None: all).
            generator: random generator for sampling.
            use_cache: feed one token per step with a KV cache (the encoder memory projected
                once per layer); False decodes the whole prefix every step (same tokens).

        Returns:
            Decoder token ids (B, 1 + n), n <= max_new_tokens, starting with the start token.
        """
        _checks.token_ids(input_ids, "input_ids", self.config.vocab_size)
        c = self.config
        if isinstance(max_new_tokens, int) and 1 + max_new_tokens > c.max_position_embeddings:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} plus the start token exceeds "
                f"max_position_embeddings={c.max_position_embeddings}"
            )
        return _seq2seq.generate(self, input_ids, max_new_tokens, attention_mask,
                                 start_id=c.decoder_start_token_id, eos_id=c.eos_token_id,
                                 pad_id=c.pad_token_id, do_sample=do_sample,
                                 temperature=temperature, top_k=top_k, generator=generator,
                                 use_cache=use_cache)  # fmt: skip

    @classmethod
    def config_from_hf(cls, hf_config: Any) -> BARTConfig:
        """The :class:`BARTConfig` of a Hugging Face ``BartConfig`` (only attributes are read).

        Raises:
            ValueError: on what this BART does not have: an activation other than gelu, relu,
                gelu_new; a final LayerNorm per stack (``add_final_layer_norm``, mBART);
                pre-norm blocks (``normalize_before``); or untied embeddings.
        """
        act = getattr(hf_config, "activation_function", None)
        if act not in _ACTIVATIONS:
            raise ValueError(
                f"config.activation_function must be one of {sorted(_ACTIVATIONS)}, got {act!r}"
            )
        for name in ("add_final_layer_norm", "normalize_before"):
            if getattr(hf_config, name, False):
                raise ValueError(f"config.{name}=True is not supported (BART is post-norm)")
        if getattr(hf_config, "tie_word_embeddings", True) is False:
            raise ValueError("config.tie_word_embeddings=False is not supported (BART ties them)")
        start = getattr(hf_config, "decoder_start_token_id", None)
        eos = hf_config.eos_token_id
        return BARTConfig(
            vocab_size=hf_config.vocab_size,
            d_model=hf_config.d_model,
            encoder_layers=hf_config.encoder_layers,
            decoder_layers=hf_config.decoder_layers,
            encoder_attention_heads=hf_config.encoder_attention_heads,
            decoder_attention_heads=hf_config.decoder_attention_heads,
            encoder_ffn_dim=hf_config.encoder_ffn_dim,
            decoder_ffn_dim=hf_config.decoder_ffn_dim,
            max_position_embeddings=hf_config.max_position_embeddings,
            dropout=float(hf_config.dropout),
            activation_function=act,
            scale_embedding=bool(hf_config.scale_embedding),
            pad_token_id=hf_config.pad_token_id,
            bos_token_id=hf_config.bos_token_id,
            eos_token_id=eos,
            decoder_start_token_id=eos if start is None else start,
        )

    @classmethod
    def from_hf(cls, model: nn.Module) -> BART:
        """Build a BART with the weights of a Hugging Face ``BartForConditionalGeneration``.

        Reads only ``model.config`` and ``model.state_dict()`` (mtlib does not import
        ``transformers``): the ``model.`` prefix goes, the stacks' copies of the shared
        embedding are checked and dropped, names go through :data:`HF_RENAMES`, and
        :func:`mtlib.loading.load_weights` checks every shape and that nothing is left out.

        Returns:
            A BART on the model's device and dtype, in its train/eval mode, computing the same
            logits (in eval mode; see the module docstring on dropout).

        Raises:
            TypeError: if ``model`` is not a module with a ``config``.
            ValueError: on an unsupported config, a head or stack embedding that differs from
                ``shared``, or a tensor that is missing, unexpected or misshapen (named).
        """
        if not isinstance(model, nn.Module) or not hasattr(model, "config"):
            raise TypeError(
                f"model must be a transformers BartForConditionalGeneration, got {type(model).__name__}"
            )
        config = cls.config_from_hf(model.config)
        state = {k.removeprefix("model."): v for k, v in model.state_dict().items()}
        shared = state.get("shared.weight")
        for name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"):  # fmt: skip
            copy = state.get(name)
            if copy is not None and shared is not None and not torch.equal(copy, shared):
                raise ValueError(f"{name} differs from shared.weight: BART ties them")
            if name != "lm_head.weight":
                state.pop(name, None)
        if "lm_head.weight" not in state and shared is not None:
            state["lm_head.weight"] = shared  # ours is the same Parameter: fill both names
        ours = cls(config).to(next(iter(state.values())))
        _seq2seq.load_renamed(ours, state, _hf_names(state), HF_RENAMES)
        return ours.train(model.training)


def _hf_names(names: Iterable[str]) -> dict[str, str]:
    """``{their name: intermediate name}``: the decoder layers' ``final_layer_norm`` (their
    third norm) becomes ``norm3``; everything else passes through to :data:`HF_RENAMES`."""
    return {
        n: re.sub(r"^(decoder\.layers\.\d+\.)final_layer_norm\.", r"\1norm3.", n) for n in names
    }
