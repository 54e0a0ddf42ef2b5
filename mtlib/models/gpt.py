"""GPT: a decoder-only Transformer language model (Radford et al., 2018, 2019).

A GPT is the encoder stack of chapter 7 with one change, the causal mask: position t may only
attend to positions <= t, so the output at t can be trained to predict token t + 1. GPT-2's
choices, all honoured here:

- token embedding + learned absolute position embedding, added (``wte`` + ``wpe``);
- Pre-LN blocks (``norm_first=True``) with GELU in its tanh approximation;
- a final LayerNorm (``ln_f``) and an output projection ``lm_head`` that *is* the token
  embedding matrix (tied weights, no bias).

The top-level names are GPT-2's (and nanoGPT's) without the ``transformer.`` prefix: ``wte``,
``wpe``, ``h`` (the blocks), ``ln_f``, ``lm_head``. Inside a block the names are mtlib's
:class:`~mtlib.blocks.EncoderBlock`'s, so loading Hugging Face's ``GPT2LMHeadModel`` is the
short table :data:`HF_RENAMES` plus two facts: GPT-2's ``Conv1D`` stores weights as
``(in, out)`` (transposed relative to ``nn.Linear``), and its ``c_attn`` packs W_Q, W_K, W_V
side by side.

Generation (:meth:`GPT.generate`) runs the prompt once, then feeds one token per step with one
:class:`~mtlib.attention.KVCache` per block; the new token's position is the cache length.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from mtlib import _checks
from mtlib.attention import KVCache
from mtlib.blocks import BlockConfig, EncoderBlock
from mtlib.loading import load_weights

__all__ = ["GPTConfig", "GPT", "HF_RENAMES", "top_k_filter", "top_p_filter", "split_c_attn"]

#: Hugging Face GPT-2 names (inside a block) that differ from ours, as (theirs, ours) pairs; the
#: first match wins, so ``attn.c_proj`` comes before ``attn``. ``c_attn`` is first split into
#: ``attn.q_proj`` / ``attn.k_proj`` / ``attn.v_proj`` by :func:`split_c_attn`.
HF_RENAMES: list[tuple[str, str]] = [
    ("ln_1", "norm1"),
    ("ln_2", "norm2"),
    ("attn.c_proj", "self_attn.out_proj"),
    ("attn", "self_attn"),
    ("mlp.c_fc", "ff.linear1"),
    ("mlp.c_proj", "ff.linear2"),
]

#: Activation names of Hugging Face's GPT-2 config that are the tanh-approximated GELU.
_HF_GELU_TANH = ("gelu_new", "gelu_pytorch_tanh")


@dataclass
class GPTConfig:
    """Sizes of a GPT. The defaults are GPT-2 small (:meth:`gpt2_small`) without dropout."""

    vocab_size: int = 50257  # number of token ids
    block_size: int = 1024  # longest sequence: rows of the position embedding
    n_layer: int = 12  # number of blocks
    d_model: int = 768  # model width (GPT-2's n_embd)
    num_heads: int = 12  # attention heads; d_model % num_heads == 0
    d_ff: int = 3072  # feed-forward hidden width (GPT-2: 4 * d_model)
    dropout: float = 0.0  # on embeddings, attention weights, hidden units and residuals
    layer_norm_eps: float = 1e-5  # LayerNorm epsilon (GPT-2's layer_norm_epsilon)
    bias: bool = True  # biases in linear layers and LayerNorms (GPT-2 has them)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer"):
            _checks.positive_int(getattr(self, name), name)
        self.block_config()  # validates d_model, num_heads, d_ff, dropout, eps

    def block_config(self) -> BlockConfig:
        """The settings every block shares: Pre-LN, GELU (tanh), causal by use."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            activation="gelu_tanh",
            norm_first=True,
            layer_norm_eps=self.layer_norm_eps,
            bias=self.bias,
        )

    @classmethod
    def gpt2_small(cls, **overrides: Any) -> GPTConfig:
        """GPT-2 small (Radford et al., 2019): 12 layers, d_model 768, 12 heads, 1024
        positions, the 50257-token BPE vocabulary, dropout 0.1; 124,439,808 parameters."""
        return replace(cls(dropout=0.1), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> GPTConfig:
        """A small character-level model for a CPU: 4 layers, d_model 96,
        4 heads, 128 positions, 96 ids (enough for printable ASCII)."""
        small = cls(vocab_size=96, block_size=128, n_layer=4, d_model=96, num_heads=4,
                    d_ff=384, dropout=0.0)  # fmt: skip
        return replace(small, **overrides)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of each row; set the others to ``-inf``.

    Args:
        logits: scores of shape (..., n_vocab).
        k: how many to keep, >= 1 (clipped to n_vocab).

    Returns:
        Tensor of the same shape. Ties with the k-th largest value are kept.
    """
    _checks.positive_int(k, "top_k")
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter (Holtzman et al., 2020): keep the smallest set of most likely tokens whose
    probability sums to at least ``p``; set the others to ``-inf``.

    Args:
        logits: scores of shape (..., n_vocab).
        p: probability mass to keep, in (0, 1]. The most likely token is always kept.

    Returns:
        Tensor of the same shape.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be a float in (0, 1], got {p!r}")
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., n_vocab)
    probs = torch.softmax(sorted_logits, dim=-1)  # (..., n_vocab)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # (..., n_vocab) mass of the more likely ones
    drop_sorted = mass_before >= p  # the set already reached p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def split_c_attn(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Split GPT-2's packed ``attn.c_attn`` into ``attn.q_proj`` / ``k_proj`` / ``v_proj``.

    ``c_attn`` is a ``Conv1D`` with weight ``(d_model, 3 d_model)`` (input by output) whose
    output columns are Q, K, V in that order; the pieces keep that ``(in, out)`` layout, so
    they still need transposing into ``nn.Linear``'s ``(out, in)``. Other names pass through.

    Args:
        tensors: GPT-2's tensors by name.

    Returns:
        The same tensors with every ``X.c_attn.weight``/``bias`` replaced by three pieces.
    """
    out: dict[str, Tensor] = {}
    for name, value in tensors.items():
        packed = re.fullmatch(r"(.*\.)?c_attn\.(weight|bias)", name)
        if packed is None:
            out[name] = value
            continue
        prefix, kind = packed[1] or "", packed[2]
        for part, chunk in zip("qkv", value.chunk(3, dim=-1), strict=True):
            out[f"{prefix}{part}_proj.{kind}"] = chunk  # (d_model, d_model) or (d_model,)
    return out


class GPT(nn.Module):
    """A decoder-only Transformer language model with GPT-2's architecture.

    ``logits = lm_head(ln_f(blocks(drop(wte[idx] + wpe[positions]))))``, every block causal.

    Args:
        config: a :class:`GPTConfig`.

    Shape:
        forward: idx (B, T) long -> logits (B, T, vocab_size).
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)  # token embedding
        self.wpe = nn.Embedding(config.block_size, config.d_model)  # position embedding
        self.drop = nn.Dropout(config.dropout)
        blocks = [EncoderBlock(config.block_config()) for _ in range(config.n_layer)]
        self.h = nn.ModuleList(blocks)  # the blocks ("h" as in GPT-2's checkpoints)
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one (vocab_size, d_model) matrix
        self.apply(self._init_weights)
        for block in blocks:  # residual projections scaled down with depth (GPT-2)
            for proj in (block.self_attn.out_proj, block.ff.linear2):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """GPT-2's initialisation: normal(0, 0.02) weights and embeddings, zero biases."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self, *, exclude_positions: bool = False) -> int:
        """Number of parameters (the tied embedding counted once).

        Args:
            exclude_positions: leave out the position embedding.
        """
        total = sum(p.numel() for p in self.parameters())
        return total - (self.wpe.weight.numel() if exclude_positions else 0)

    def new_cache(self) -> list[KVCache]:
        """An empty cache for :meth:`forward`: one :class:`~mtlib.attention.KVCache` per block."""
        return [KVCache() for _ in self.h]

    def forward(
        self, idx: Tensor, *, cache: list[KVCache] | None = None, last_only: bool = False
    ) -> Tensor:
        """Next-token logits at every position (or at the last one only).

        Args:
            idx: token ids (long) of shape (B, T), each in [0, vocab_size). With a cache they
                are the *new* tokens, at positions ``cache_length .. cache_length + T - 1``.
            cache: from :meth:`new_cache`, updated in place (keys and values appended).
            last_only: compute the logits of the last position only, as :meth:`generate`
                needs (the head is the largest matrix: this skips ``T - 1`` of its products).

        Returns:
            Logits of shape (B, T, vocab_size), or (B, 1, vocab_size) with ``last_only``.
        """
        _checks.token_ids(idx, "idx", self.config.vocab_size)
        if cache is not None and len(cache) != len(self.h):
            raise ValueError(
                f"cache must hold one KVCache per block ({len(self.h)}), got {len(cache)}"
            )
        past = 0 if cache is None else cache[0].length  # positions already processed
        length = idx.shape[1]
        if past + length > self.config.block_size:
            raise ValueError(
                f"idx has {length} tokens after {past} cached ones; positions must stay below "
                f"block_size={self.config.block_size}"
            )
        positions = torch.arange(past, past + length, device=idx.device)  # (T,)
        x = self.wte(idx) + self.wpe(positions)  # (B, T, d_model)
        x = self.drop(x)
        for i, block in enumerate(self.h):
            x = block(x, is_causal=True, cache=None if cache is None else cache[i])
        if last_only:
            x = x[:, -1:]  # (B, 1, d_model)
        return self.lm_head(self.ln_f(x))  # (B, T or 1, vocab_size)

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Continue ``idx`` by ``max_new_tokens`` tokens, one at a time, in eval mode.

        Each step takes the last position's logits, divides them by ``temperature``, applies
        :func:`top_k_filter` then :func:`top_p_filter`, and picks the most likely token
        (``do_sample=False``: greedy) or draws one from the softmax (``do_sample=True``).

        With ``use_cache`` the prompt runs once and every later step feeds only the new token,
        whose keys and values are appended to one KVCache per block: the same tokens as
        recomputing the whole prefix, for a fraction of the work. The total length must then
        fit in ``block_size``. Without the cache, the context is cropped to the last
        ``block_size`` tokens, so generation may run longer.

        Args:
            idx: prompt token ids (long) of shape (B, T), T >= 1.
            max_new_tokens: how many tokens to add, >= 0.
            do_sample: draw from the distribution instead of taking the argmax.
            temperature: > 0; below 1 sharpens the distribution, above 1 flattens it.
            top_k: keep only the k most likely tokens (None: all).
            top_p: keep the smallest set of tokens with probability >= top_p (None: all).
            use_cache: reuse keys and values of earlier positions.
            generator: random generator for sampling (reproducible draws).

        Returns:
            The prompt followed by the new tokens, token ids of shape ``(B, T + max_new_tokens)``.
        """
        _checks.token_ids(idx, "idx", self.config.vocab_size)
        _check_generate_args(max_new_tokens, temperature, top_k, top_p)
        total = idx.shape[1] + max_new_tokens
        if use_cache and total > self.config.block_size:
            raise ValueError(
                f"prompt length {idx.shape[1]} + max_new_tokens {max_new_tokens} = {total} exceeds "
                f"block_size={self.config.block_size}; use use_cache=False to slide the context"
            )
        was_training = self.training
        self.eval()
        try:
            cache = self.new_cache() if use_cache else None
            context = idx[:, -self.config.block_size :]  # (B, <= block_size)
            for _ in range(max_new_tokens):
                logits = self(context, cache=cache, last_only=True)[:, -1, :]  # (B, n_vocab)
                next_id = self._choose(logits, do_sample, temperature, top_k, top_p, generator)
                idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
                context = next_id if use_cache else idx[:, -self.config.block_size :]
        finally:
            self.train(was_training)
        return idx

    @staticmethod
    def _choose(
        logits: Tensor,
        do_sample: bool,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        generator: torch.Generator | None,
    ) -> Tensor:
        """One token per row from the last position's logits (B, n_vocab) -> (B, 1)."""
        logits = logits.float() / temperature
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if top_p is not None:
            logits = top_p_filter(logits, top_p)
        if not do_sample:
            return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        probs = torch.softmax(logits, dim=-1)  # (B, n_vocab)
        return torch.multinomial(probs, 1, generator=generator)  # (B, 1)

    @classmethod
    def config_from_hf(cls, hf_config: Any) -> GPTConfig:
        """The :class:`GPTConfig` of a Hugging Face ``GPT2Config`` (unsupported options refused).

        Args:
            hf_config: a ``transformers.GPT2Config`` (only its attributes are read).
        """
        act = getattr(hf_config, "activation_function", None)
        if act not in _HF_GELU_TANH:
            raise ValueError(
                f"config.activation_function must be one of {_HF_GELU_TANH} (GPT-2's GELU), got {act!r}"
            )
        unsupported = {
            "scale_attn_weights": (getattr(hf_config, "scale_attn_weights", True), True),
            "scale_attn_by_inverse_layer_idx": (
                getattr(hf_config, "scale_attn_by_inverse_layer_idx", False),
                False,
            ),
            "add_cross_attention": (getattr(hf_config, "add_cross_attention", False), False),
        }
        for name, (value, needed) in unsupported.items():
            if bool(value) != needed:
                raise ValueError(f"config.{name}={value!r} is not supported (needs {needed})")
        n_inner = getattr(hf_config, "n_inner", None)
        return GPTConfig(
            vocab_size=hf_config.vocab_size,
            block_size=hf_config.n_positions,
            n_layer=hf_config.n_layer,
            d_model=hf_config.n_embd,
            num_heads=hf_config.n_head,
            d_ff=4 * hf_config.n_embd if n_inner is None else n_inner,
            dropout=float(hf_config.resid_pdrop),
            layer_norm_eps=float(hf_config.layer_norm_epsilon),
        )

    @classmethod
    def from_hf(cls, model: nn.Module) -> GPT:
        """Build a GPT with the weights of a Hugging Face ``GPT2LMHeadModel`` (or ``GPT2Model``).

        Reads only ``model.config`` and ``model.state_dict()`` (mtlib does not import
        ``transformers``): ``c_attn`` is split into Q, K, V (:func:`split_c_attn`), the
        ``Conv1D`` weights are transposed, names go through :data:`HF_RENAMES`, and
        :func:`mtlib.loading.load_weights` checks every shape and that nothing is left out.

        Dropout: GPT-2 drops the attention weights and each sub-layer's output; mtlib's block
        also drops the feed-forward hidden units, and uses one rate for all of them (HF's
        ``resid_pdrop``). Outputs are equal in eval mode. A model in training mode whose
        ``attn_pdrop``, ``embd_pdrop`` and ``resid_pdrop`` differ is refused, since fine-tuning
        the copy would silently drop at another rate (GPT-2's own checkpoints use 0.1 for all
        three); call ``model.eval()`` first to copy it for inference.

        Args:
            model: the Hugging Face model, with tied input and output embeddings.

        Returns:
            A GPT on the model's device and dtype, in its train/eval mode, computing the same
            logits.

        Raises:
            ValueError: on an unsupported config, untied embeddings, unequal dropout rates in
                training mode, or a tensor that is missing, unexpected or misshapen (the error
                names it).
        """
        if not isinstance(model, nn.Module) or not hasattr(model, "config"):
            raise TypeError(
                f"model must be a transformers GPT2LMHeadModel or GPT2Model, got {type(model).__name__}"
            )
        config = cls.config_from_hf(model.config)
        names = ("attn_pdrop", "embd_pdrop", "resid_pdrop")
        rates = {n: float(getattr(model.config, n, config.dropout)) for n in names}
        if model.training and len(set(rates.values())) > 1:
            raise ValueError(
                f"the model is in training mode with unequal dropout rates {rates}: mtlib's GPT "
                "uses one rate everywhere, so the copy would train differently. Set them equal "
                "in model.config, or call model.eval() to copy it for inference"
            )
        state = dict(model.state_dict())
        # Older transformers versions keep the causal mask as buffers named attn.bias and
        # attn.masked_bias: not weights, so not copied.
        state = {k: v for k, v in state.items() if not re.search(r"\.attn\.(masked_)?bias$", k)}
        # GPT2LMHeadModel names its body "transformer." and has lm_head.weight (the tied wte);
        # a bare GPT2Model has neither.
        state = {k.removeprefix("transformer."): v for k, v in state.items()}
        if "lm_head.weight" not in state and "wte.weight" in state:
            state["lm_head.weight"] = state["wte.weight"]
        head, wte = state.get("lm_head.weight"), state.get("wte.weight")
        if (
            head is not None
            and wte is not None
            and head.shape == wte.shape
            and not torch.equal(head, wte)
        ):
            raise ValueError(
                "lm_head.weight differs from wte.weight: GPT ties them (untied heads are not supported)"
            )
        state = split_c_attn(state)
        transpose = [k for k in state if re.search(r"^h\.\d+\..*(_proj|c_fc)\.weight$", k)]
        ours = cls(config).to(next(iter(state.values())))
        load_weights(ours, state, HF_RENAMES, transpose=transpose)
        return ours.train(model.training)  # same mode as the model it copies


def _check_generate_args(
    max_new_tokens: object, temperature: object, top_k: object, top_p: object
) -> None:
    """Refuse bad arguments of :meth:`GPT.generate` before any computation."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not temperature > 0
    ):
        raise ValueError(f"temperature must be a float > 0, got {temperature!r}")
    if top_k is not None:
        _checks.positive_int(top_k, "top_k")
    if top_p is not None:
        top_p_filter(torch.zeros(1), top_p)  # type: ignore[arg-type]  # raises if out of range
