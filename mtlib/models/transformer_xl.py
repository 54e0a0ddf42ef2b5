"""Transformer-XL: a language model with memory beyond the segment (Dai et al., 2019).

A vanilla Transformer LM reads fixed segments of ``seg_len`` tokens and forgets everything
before the segment ("context fragmentation"). Transformer-XL makes two changes:

1. **Segment-level recurrence.** Each layer keeps the hidden states it received for the last
   ``mem_len`` tokens (its *memory*). The next segment's queries attend to ``[memory; segment]``.
   The memory is detached: no gradient flows into the previous segment, so the backward pass
   covers one segment. With ``L`` layers, segments of ``T = seg_len`` and ``T_mem = mem_len``,
   the top layer's output for the last token of a segment depends on up to
   ``T - 1 + T_mem + (L - 1) * T * ceil(T_mem / T)`` tokens back: the first layer adds
   ``T_mem``; the oldest memory slot of a higher layer holds a state that also saw the start of
   its own segment, so each further layer adds ``T_mem`` rounded up to whole segments. When
   ``T_mem`` is a multiple of ``T`` this is ``T - 1 + L * T_mem``.
2. **Relative positions.** Absolute positions restart at 0 in every segment, so memory token 3
   and current token 3 would look alike. The score of query ``i`` and key ``j`` is instead

   ``A[i, j] = (q_i + u) . k_j  +  (q_i + v) . (R[i - j] W_R)``

   (content term + position term): ``R`` is the sinusoidal table read at the *distance*
   ``i - j``, ``u`` and ``v`` are two learned global biases (one vector per head). The position
   term of all pairs is computed in one matmul against ``R`` for distances ``K-1 .. 0`` and
   realigned with :func:`rel_shift`.

``positions="absolute"`` is the chapter's "break it": sinusoidal positions 0..T-1 added at the
input of every segment, memory kept, no position term.

Here the blocks are Pre-LN (as GPT-2 and mtlib's GPT), with a final LayerNorm; the paper's code
defaults to Post-LN. The attention itself is mtlib's
:func:`~mtlib.attention.scaled_dot_product_attention`: the content term is its ``q k^T`` with
``q + u`` as queries, the position term is its additive ``bias``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from mtlib import _checks
from mtlib.attention import scaled_dot_product_attention
from mtlib.blocks import FeedForward
from mtlib.masks import causal_mask
from mtlib.positional import sinusoidal_table

__all__ = ["TransformerXLConfig", "TransformerXL", "RelMultiHeadAttention", "rel_shift"]

POSITIONS = ("relative", "absolute")


@dataclass
class TransformerXLConfig:
    """Sizes of a Transformer-XL. The defaults are a small character-level model."""

    vocab_size: int = 96  # number of token ids
    d_model: int = 64  # model width; even (sinusoidal sin/cos pairs)
    num_heads: int = 4  # attention heads; d_model % num_heads == 0
    d_ff: int = 256  # feed-forward hidden width
    num_layers: int = 2  # number of blocks
    seg_len: int = 32  # tokens per training segment (longest absolute position + 1)
    mem_len: int = 32  # cached hidden states per layer; 0 = a vanilla segment model
    dropout: float = 0.0  # on embeddings, attention weights and residual branches
    positions: str = "relative"  # "relative" (the paper) or "absolute" (the "break it")

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers", "seg_len"):
            _checks.positive_int(getattr(self, name), name)
        if isinstance(self.mem_len, bool) or not isinstance(self.mem_len, int):
            raise TypeError(f"mem_len must be an int, got {type(self.mem_len).__name__}")
        if self.mem_len < 0:
            raise ValueError(f"mem_len must be >= 0, got {self.mem_len}")
        if self.d_model % 2 != 0:
            raise ValueError(f"d_model must be even (sinusoidal pairs), got {self.d_model}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}"
            )
        _checks.probability(self.dropout, "dropout")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")

    @classmethod
    def tiny(cls, **overrides: Any) -> TransformerXLConfig:
        """The chapter's model: 2 layers, d_model 64, 4 heads, segments and memory of 32."""
        return replace(cls(), **overrides)


def rel_shift(x: Tensor) -> Tensor:
    """Realign position scores from "column = distance" to "column = key" (the rel-shift trick).

    ``x[..., i, c]`` is the score of query ``i`` against distance ``K - 1 - c`` (the table ``R``
    is read from the farthest distance down to 0). Query ``i`` of a segment of ``T`` queries sits
    at position ``i + M`` among the ``K = M + T`` keys, so key ``j`` is at distance
    ``i + M - j``. Padding one zero column, reading the buffer with rows of length ``T`` and
    dropping one row moves row ``i`` left by ``T - 1 - i``: afterwards
    ``out[..., i, j] = x[..., i, j + T - 1 - i]``, the score for distance ``i + M - j``, for every
    ``j <= i + M`` (the causal keys; the entries above are junk and must be masked).

    Args:
        x: scores of shape (..., T, K) with K >= T.

    Returns:
        Tensor of shape (..., T, K).
    """
    *lead, t, k = x.shape
    padded = torch.nn.functional.pad(x, (1, 0))  # (..., T, K + 1), a zero column on the left
    padded = padded.reshape(*lead, k + 1, t)  # (..., K + 1, T) the same buffer, rows of T
    return padded[..., 1:, :].reshape(*lead, t, k)  # (..., T, K) drop one row, read back


def _refuse_future_keys(mask: Tensor, t: int, k: int) -> None:
    """Raise if a bool (..., T, K) mask lets query ``i`` attend a key after its own position
    ``i + K - T``: the rel-shift's scores there are junk (another row's distances), and a language
    model that sees them reads the answer."""
    if mask.dtype != torch.bool or tuple(mask.shape[-2:]) != (t, k):
        return  # a wrong shape or dtype is reported by the attention's own checks
    future = ~causal_mask(t, k, device=mask.device)  # (T, K) True above the causal line
    if bool((mask & future).any()):
        raise ValueError(
            f"mask lets a query attend keys after its own position (query i of the T={t} "
            f"queries sits at position i + {k - t} of the K={k} keys): relative position scores "
            "exist only for keys j <= i + M, so such a mask must be False above that line; "
            "start from causal_mask(T, K) and only remove keys (a band)"
        )


class RelMultiHeadAttention(nn.Module):
    """Multi-head attention over ``[memory; segment]`` with Transformer-XL's relative positions.

    Projections are named as in :class:`~mtlib.attention.MultiHeadAttention` (``q_proj``,
    ``k_proj``, ``v_proj``, ``out_proj``) plus ``r_proj`` (the paper's W_{k,R}, no bias) and the
    global biases ``u`` and ``v`` of shape (num_heads, d_head).

    Args:
        d_model: model width.
        num_heads: number of heads.
        dropout: dropout on the attention weights.
    """

    def __init__(self, d_model: int, num_heads: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads, self.d_head, self.dropout = num_heads, d_model // num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.r_proj = nn.Linear(d_model, d_model, bias=False)  # W_{k,R}
        self.u = nn.Parameter(torch.zeros(num_heads, self.d_head))  # content bias
        self.v = nn.Parameter(torch.zeros(num_heads, self.d_head))  # position bias

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.d_head).transpose(1, 2)  # (B, H, T, Dh)

    def position_scores(self, q: Tensor, r: Tensor) -> Tensor:
        """``(q_i + v) . (R[i - j] W_R)`` for every query i and key j, already rel-shifted.

        Args:
            q: queries of shape (B, H, T, Dh), without any bias.
            r: the sinusoidal table for distances K-1 .. 0, shape (K, d_model).

        Returns:
            Scores of shape (B, H, T, K) (unscaled; junk above the causal diagonal).
        """
        k = r.shape[0]
        rk = self.r_proj(r).view(k, self.num_heads, self.d_head).transpose(0, 1)  # (H, K, Dh)
        by_distance = (q + self.v[:, None]) @ rk.transpose(-2, -1)  # (B, H, T, K)
        return rel_shift(by_distance)  # (B, H, T, K) column j = key j

    def forward(self, x: Tensor, context: Tensor, *, r: Tensor | None, mask: Tensor) -> Tensor:
        """Attend from the segment to ``context = [memory; segment]``.

        Args:
            x: the segment (queries), shape (B, T, d_model).
            context: memory and segment (keys and values), shape (B, K, d_model), K = M + T.
            r: the table of :meth:`position_scores`, (K, d_model); None = no position term
               (absolute positions were added at the input).
            mask: bool, True = may attend, shape (T, K) or (1, 1, T, K). When B == T a 2-D mask
                other than ``causal_mask(T, K)`` is refused as ambiguous (it could be a (B, K)
                padding mask, see :func:`mtlib.masks.check_mask`): pass it as (1, 1, T, K).
                With ``r`` given, a mask that lets query ``i`` see a key after position
                ``i + M`` raises ``ValueError`` (the position scores there are junk).

        Returns:
            Tensor of shape (B, T, d_model).
        """
        out, _ = self._attend(x, context, r, mask, need_weights=False)  # (B, H, T, Dh)
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1))  # (B, T, d_model)

    def attention_weights(
        self, x: Tensor, context: Tensor, *, r: Tensor | None, mask: Tensor
    ) -> Tensor:
        """The attention weights of :meth:`forward` (same arguments), shape (B, H, T, K)."""
        _, weights = self._attend(x, context, r, mask, need_weights=True)
        assert weights is not None
        return weights

    def _attend(
        self, x: Tensor, context: Tensor, r: Tensor | None, mask: Tensor, *, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Heads' outputs (B, H, T, Dh), and the weights (B, H, T, K) if asked for."""
        q = self._split(self.q_proj(x))  # (B, H, T, Dh)
        k = self._split(self.k_proj(context))  # (B, H, K, Dh)
        value = self._split(self.v_proj(context))  # (B, H, K, Dh)
        scale = self.d_head**-0.5
        bias: Tensor | None = None
        u: Tensor | float = 0.0
        if r is not None:
            _refuse_future_keys(mask, q.shape[-2], k.shape[-2])
            bias = self.position_scores(q, r) * scale  # (B, H, T, K) the position term
            u = self.u[:, None]  # (H, 1, Dh) broadcast over queries
        result = scaled_dot_product_attention(
            q + u,  # content term: (q_i + u) . k_j
            k,
            value,
            mask=mask,
            bias=bias,
            scale=scale,
            dropout_p=self.dropout if self.training else 0.0,
            return_weights=need_weights,
        )  # (B, H, T, Dh), or with the weights (B, H, T, K)
        if isinstance(result, Tensor):
            return result, None
        return result


class TransformerXLBlock(nn.Module):
    """Pre-LN block: ``x + attn(LN([mem; x]))``, then ``x + ff(LN(x))``.

    Args:
        config: the model's config.
    """

    def __init__(self, config: TransformerXLConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.d_model)
        self.attn = RelMultiHeadAttention(config.d_model, config.num_heads, dropout=config.dropout)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.ff = FeedForward(config.d_model, config.d_ff, dropout=config.dropout)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, mem: Tensor, *, r: Tensor | None, mask: Tensor) -> Tensor:
        """(B, T, d) with memory (B, M, d) -> (B, T, d)."""
        context = self.norm1(torch.cat([mem, x], dim=1))  # (B, M + T, d)
        x = x + self.dropout(self.attn(context[:, mem.shape[1] :], context, r=r, mask=mask))
        return x + self.dropout(self.ff(self.norm2(x)))  # (B, T, d)


class TransformerXL(nn.Module):
    """Transformer-XL language model: token ids and memories in, logits and new memories out.

    Names: ``tok_emb``, ``layers`` (``TransformerXLBlock``), ``norm_f``, ``lm_head``.

    Args:
        config: a :class:`TransformerXLConfig`.
    """

    table: Tensor  # (seg_len + mem_len, d_model) sinusoidal rows, a non-persistent buffer

    def __init__(self, config: TransformerXLConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(TransformerXLBlock(config) for _ in range(config.num_layers))
        self.norm_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # sinusoidal rows 0 .. seg_len + mem_len - 1 (relative: distances; absolute: positions)
        table = sinusoidal_table(config.seg_len + config.mem_len, config.d_model)
        self.register_buffer("table", table.float(), persistent=False)

    def init_mems(self, batch_size: int) -> list[Tensor]:
        """Empty memories: one (batch_size, 0, d_model) tensor per layer."""
        p = self.tok_emb.weight
        return [p.new_zeros(batch_size, 0, self.config.d_model) for _ in self.layers]

    def forward(
        self, idx: Tensor, mems: list[Tensor] | None = None, *, mask: Tensor | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """Read one segment after the memories.

        Args:
            idx: token ids of shape (B, T), 1 <= T <= seg_len.
            mems: one tensor (B, M, d_model) per layer, M <= mem_len (from a previous call or
                :meth:`init_mems`); None = empty.
            mask: bool (T, M + T), True = may attend; default the causal mask (every memory
                slot and the segment up to the query). Tests use it for banded masks. A mask that
                lets a query see a later key raises ``ValueError``.

        Returns:
            ``(logits, new_mems)``: logits (B, T, vocab_size) and, per layer, the last
            ``mem_len`` hidden states of ``[memory; segment]`` that entered it, detached.
        """
        cfg = self.config
        _checks.token_ids(idx, "idx", cfg.vocab_size)
        b, t = idx.shape
        if t > cfg.seg_len:
            raise ValueError(f"idx has {t} tokens, more than seg_len={cfg.seg_len}")
        mems = self.init_mems(b) if mems is None else mems
        if not isinstance(mems, list) or len(mems) != cfg.num_layers:
            raise ValueError(f"mems must be a list of {cfg.num_layers} tensors (one per layer)")
        m = mems[0].shape[1] if isinstance(mems[0], Tensor) else -1
        p = self.tok_emb.weight
        for i, mem in enumerate(mems):
            _checks.float_tensor(mem, f"mems[{i}]", f"(batch={b}, M<={cfg.mem_len}, "
                                 f"d_model={cfg.d_model})", (b, m, cfg.d_model))  # fmt: skip
            if mem.dtype != p.dtype or mem.device != p.device:
                raise ValueError(f"mems[{i}] must have the model's dtype {p.dtype} on device "
                                 f"{p.device}, got {mem.dtype} on {mem.device}")  # fmt: skip
        if m > cfg.mem_len:
            raise ValueError(f"mems hold {m} positions, more than mem_len={cfg.mem_len}")
        k = m + t  # keys: memory + segment
        if mask is None:
            mask = causal_mask(t, k, device=idx.device)  # (T, K) all memory + causal
        elif mask.shape != (t, k) or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor of shape (T={t}, M+T={k})")
        else:
            _refuse_future_keys(mask, t, k)
        mask = mask[None, None]  # (1, 1, T, K): one table for every stream, even when B == T
        x = self.tok_emb(idx)  # (B, T, d)
        r: Tensor | None = None
        if cfg.positions == "absolute":
            x = x + self.table[:t]  # positions 0..T-1 again in every segment
        else:
            r = self.table[:k].flip(0)  # (K, d) rows for distances K-1 .. 0
        x = self.drop(x)
        new_mems = []
        for layer, mem in zip(self.layers, mems, strict=True):
            both = torch.cat([mem, x], dim=1)  # (B, M + T, d) what this layer reads
            new_mems.append(both[:, max(0, k - cfg.mem_len) :].detach())  # (B, <=mem_len, d)
            x = layer(x, mem, r=r, mask=mask)  # (B, T, d)
        return self.lm_head(self.norm_f(x)), new_mems  # (B, T, V)
