"""Positional information: sinusoidal, learned, relative (T5), rotary (RoPE) and ALiBi.

Attention is permutation-equivariant: shuffle the tokens and the outputs shuffle with them.
Everything in this module puts word order back, in one of two places:

- *added to the input*: :class:`SinusoidalEncoding` (Vaswani et al., 2017) and
  :class:`LearnedEncoding` return ``x + P[pos]`` for inputs of shape (B, T, d_model);
- *inside attention*: :class:`RelativePositionBias` (T5, Raffel et al., 2020) and
  :func:`alibi_bias` (Press et al., 2022) return an additive bias of shape (1, H, Tq, Tk)
  for the attention scores, and :class:`RotaryEmbedding` (Su et al., 2021) rotates queries
  and keys of shape (B, H, T, Dh) so that their dot products depend on m - n only.

Every module takes an ``offset``: the position of the first token of the input. During
step-by-step decoding the token at step t sits at position t, not 0.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mtlib import _checks

__all__ = [
    "SinusoidalEncoding",
    "LearnedEncoding",
    "RelativePositionBias",
    "RotaryEmbedding",
    "alibi_slopes",
    "alibi_bias",
    "sinusoidal_table",
]


def _check_span(name: str, offset: int, length: int, max_len: int) -> None:
    """Raise a ValueError if positions ``offset .. offset+length-1`` do not fit in ``max_len``."""
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if offset + length > max_len:
        raise ValueError(
            f"{name}: positions {offset}..{offset + length - 1} (sequence length {length}, "
            f"offset {offset}) exceed max_len={max_len}; build the module with a larger max_len"
        )


def sinusoidal_table(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal table of Vaswani et al. (2017), computed in float64.

    ``PE[pos, 2i] = sin(pos / base^(2i/d_model))`` and
    ``PE[pos, 2i+1] = cos(pos / base^(2i/d_model))``.

    Args:
        max_len: number of positions (rows).
        d_model: model width (columns); must be even so that every sine has its cosine.
        base: the wavelength base, 10000 in the paper.

    Returns:
        Tensor of shape (max_len, d_model), dtype float64.

    Raises:
        ValueError: if ``d_model`` is odd or a size is not positive.
    """
    if d_model <= 0 or d_model % 2 != 0:
        raise ValueError(
            f"d_model must be a positive even number for sinusoidal encoding (sin/cos pairs), "
            f"got d_model={d_model}"
        )
    if max_len <= 0:
        raise ValueError(f"max_len must be positive, got max_len={max_len}")
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angles = pos / base ** (two_i / d_model)  # (L, d/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


class SinusoidalEncoding(nn.Module):
    """Fixed sinusoidal positional encoding added to the input (Vaswani et al., 2017).

    ``d_model`` must be even: each frequency is a (sin, cos) pair, which is what makes
    ``PE[pos + k]`` a fixed rotation of ``PE[pos]``. An odd width would leave a lone sine
    without that property, so it is rejected rather than silently padded.

    Args:
        d_model: model width.
        max_len: longest sequence (plus offset) the table covers.
        dropout: dropout applied after the addition, as in the paper.

    Shape:
        forward: x (B, T, d_model) -> (B, T, d_model).
    """

    pe: torch.Tensor

    def __init__(self, d_model: int, max_len: int = 5000, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        table = sinusoidal_table(max_len, d_model).to(torch.get_default_dtype())
        self.register_buffer("pe", table, persistent=False)  # (max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def table(self, positions: torch.Tensor | int) -> torch.Tensor:
        """Rows of the table for the given positions.

        Args:
            positions: an int, or an integer tensor of any shape (...).

        Returns:
            Tensor of shape (..., d_model) (or (d_model,) for an int).
        """
        positions = torch.as_tensor(positions, device=self.pe.device)
        if positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be integers, got dtype {positions.dtype}")
        if positions.numel() and (positions.min() < 0 or positions.max() >= self.max_len):
            raise ValueError(f"positions must lie in [0, max_len={self.max_len})")
        return self.pe[positions]

    def forward(self, x: torch.Tensor, *, offset: int = 0) -> torch.Tensor:
        """Add the encodings of positions ``offset .. offset+T-1`` to ``x``.

        Args:
            x: input of shape (B, T, d_model).
            offset: position of the first token (the step index when decoding one token
                at a time).

        Returns:
            Tensor of shape (B, T, d_model).
        """
        _checks.float_tensor(
            x, "x", f"(batch, seq_len, d_model={self.d_model})", (None, None, self.d_model)
        )
        _check_span("SinusoidalEncoding", offset, x.shape[1], self.max_len)
        pe = self.pe[offset : offset + x.shape[1]].to(x.dtype)  # (T, d_model)
        return self.dropout(x + pe)


class LearnedEncoding(nn.Module):
    """Learned absolute positions (BERT, GPT-2): one trainable vector per position.

    Args:
        d_model: model width.
        max_len: number of positions the embedding table holds.
        dropout: dropout applied after the addition.

    Shape:
        forward: x (B, T, d_model) -> (B, T, d_model).
    """

    def __init__(self, d_model: int, max_len: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.max_len = max_len
        self.d_model = d_model
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, *, offset: int = 0) -> torch.Tensor:
        """Add the learned vectors of positions ``offset .. offset+T-1`` to ``x``.

        Args:
            x: input of shape (B, T, d_model).
            offset: position of the first token.

        Returns:
            Tensor of shape (B, T, d_model).
        """
        _checks.float_tensor(
            x, "x", f"(batch, seq_len, d_model={self.d_model})", (None, None, self.d_model)
        )
        _check_span("LearnedEncoding", offset, x.shape[1], self.max_len)
        positions = torch.arange(offset, offset + x.shape[1], device=x.device)  # (T,)
        return self.dropout(x + self.embedding(positions))


class RelativePositionBias(nn.Module):
    """T5's learned relative position bias, one scalar per (bucket, head).

    The relative position ``key_pos - query_pos`` is mapped to a bucket: small distances get
    a bucket each, larger ones share logarithmically wider buckets, and the last bucket collects
    every distance from some point below ``max_distance`` on (with the defaults, 32 buckets and
    ``max_distance=128``: from 113 on for a decoder, from 91 on with ``bidirectional=True``).
    The table starts from ``nn.Embedding``'s N(0, 1); Hugging Face's T5 initialises it with
    standard deviation ``d_model ** -0.5``. With ``bidirectional=True`` half of the
    buckets are for keys after the query; otherwise (decoders) all keys after the query share
    bucket 0 with distance 0 (they are masked anyway).

    The embedding is named ``relative_attention_bias`` as in Hugging Face's T5, so loading
    its weights is a one-line copy.

    Args:
        num_heads: number of attention heads H.
        num_buckets: number of buckets.
        max_distance: distances >= max_distance share the last bucket (it starts earlier).
        bidirectional: whether keys after the query get their own buckets.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__()
        min_buckets = 4 if bidirectional else 2
        if num_buckets < min_buckets:
            raise ValueError(
                f"num_buckets must be >= {min_buckets} (bidirectional={bidirectional}), "
                f"got {num_buckets}"
            )
        max_exact = num_buckets // (4 if bidirectional else 2)
        if max_distance <= max_exact:
            raise ValueError(
                f"max_distance must exceed the exact range {max_exact}, got {max_distance}"
            )
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    @staticmethod
    def bucket(
        relative_position: torch.Tensor,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> torch.Tensor:
        """Map relative positions (key - query) to bucket indices, as T5 does.

        Args:
            relative_position: integer tensor of any shape (...).
            bidirectional: whether positive offsets get their own half of the buckets.
            num_buckets: number of buckets.
            max_distance: distances >= max_distance share the last bucket (it starts earlier).

        Returns:
            Long tensor of shape (...) with values in [0, num_buckets).
        """
        buckets = torch.zeros_like(relative_position, dtype=torch.long)
        if bidirectional:
            num_buckets //= 2
            buckets = buckets + (relative_position > 0).long() * num_buckets
            distance = relative_position.abs()
        else:
            distance = (-relative_position).clamp(min=0)  # future keys -> distance 0
        max_exact = num_buckets // 2
        is_small = distance < max_exact
        # log-spaced buckets for distances in [max_exact, max_distance)
        # float32 as in T5's reference code, so the bucket edges match it exactly
        ratio = distance.clamp(min=max_exact).float() / max_exact
        log_bucket = torch.log(ratio) / math.log(max_distance / max_exact)
        large = max_exact + (log_bucket * (num_buckets - max_exact)).long()
        large = large.clamp(max=num_buckets - 1)
        return buckets + torch.where(is_small, distance.long(), large)

    def forward(
        self, q_len: int, k_len: int | None = None, *, offset: int | None = None
    ) -> torch.Tensor:
        """The additive bias for a (q_len, k_len) score matrix.

        Args:
            q_len: number of queries Tq.
            k_len: number of keys Tk (default ``q_len``).
            offset: position of the first query. Default ``k_len - q_len``: the queries are
                the last ``q_len`` positions, as during cached decoding (same convention as
                :func:`mtlib.masks.causal_mask`).

        Returns:
            Float tensor of shape (1, H, Tq, Tk), to be added to the attention scores.
        """
        k_len = q_len if k_len is None else k_len
        offset = k_len - q_len if offset is None else offset
        device = self.relative_attention_bias.weight.device
        q_pos = torch.arange(offset, offset + q_len, device=device)[:, None]  # (Tq, 1)
        k_pos = torch.arange(k_len, device=device)[None, :]  # (1, Tk)
        buckets = self.bucket(
            k_pos - q_pos,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (Tq, Tk)
        values = self.relative_attention_bias(buckets)  # (Tq, Tk, H)
        return values.permute(2, 0, 1).unsqueeze(0)  # (1, H, Tq, Tk)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, RoPE (Su et al., 2021).

    Each pair of channels of a query or key at position m is rotated by the angle
    ``m * theta_i`` with ``theta_i = base^(-2i/Dh)``. Because rotations compose,
    ``rot(q, m) . rot(k, n)`` depends on ``m - n`` only.

    Two pairings are in use, and they are the same thing up to a fixed permutation of the
    channels:

    - ``interleaved=False`` (default; GPT-NeoX and Hugging Face's Llama): channel i is paired
      with channel i + Dh/2 ("rotate half"). Meta's original Llama code pairs neighbours;
      Hugging Face's conversion permutes the rows of W^Q and W^K to match, so Meta's weights
      need that permutation before they work with this default;
    - ``interleaved=True`` (the paper, GPT-J): channel 2i is paired with 2i + 1.

    Args:
        head_dim: per-head width Dh; must be even.
        base: the frequency base (10000 in the paper).
        max_len: number of positions the cos/sin tables cover.
        interleaved: pairing convention, see above.

    Shape:
        rotate: x (B, H, T, Dh) with ``layout="BHTD"`` or (B, T, H, Dh) with ``layout="BTHD"``
        (4-D only), same shape out. Positions are ``offset + 0 .. T-1``, one integer offset
        for the whole batch (no per-row position ids).
    """

    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        max_len: int = 4096,
        interleaved: bool = False,
    ) -> None:
        super().__init__()
        if head_dim <= 0 or head_dim % 2 != 0:
            raise ValueError(
                f"head_dim must be a positive even number for rotary embedding, got {head_dim}"
            )
        self.head_dim = head_dim
        self.base = base
        self.max_len = max_len
        self.interleaved = interleaved
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq  # (L, Dh/2)
        if interleaved:
            angles = angles.repeat_interleave(2, dim=-1)  # (L, Dh): t0 t0 t1 t1 ...
        else:
            angles = torch.cat([angles, angles], dim=-1)  # (L, Dh): t0 t1 ... t0 t1 ...
        dtype = torch.get_default_dtype()
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)  # (L, Dh)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)  # (L, Dh)

    def _rotate_90(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate every channel pair (a, b) to (-b, a)."""
        if self.interleaved:
            pairs = x.unflatten(-1, (-1, 2))  # (..., Dh/2, 2)
            return torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)  # (..., Dh)
        first, second = x.chunk(2, dim=-1)  # (..., Dh/2) each
        return torch.cat([-second, first], dim=-1)  # (..., Dh)

    def rotate(self, x: torch.Tensor, *, layout: str, offset: int = 0) -> torch.Tensor:
        """Rotate queries or keys as if their tokens sat at positions ``offset .. offset+T-1``.

        The layout must be named: the same 4-D tensor read as (B, T, H, Dh) instead of
        (B, H, T, Dh) would be rotated by head index instead of by position, silently.
        With a KV cache, rotate only the new keys (at the offset of the new queries) before
        appending them: the cached keys are already rotated. :class:`~mtlib.attention.MultiHeadAttention`
        does this itself when built with ``rotary=``.

        Args:
            x: queries or keys, of shape (B, H, T, Dh) or (B, T, H, Dh).
            layout: ``"BHTD"`` (heads before positions, as inside attention) or ``"BTHD"``.
            offset: position of the first token.

        Returns:
            Tensor of the same shape, layout and dtype.
        """
        if layout not in ("BHTD", "BTHD"):
            raise ValueError(f'layout must be "BHTD" or "BTHD", got {layout!r}')
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[-1] != self.head_dim:
            raise ValueError(
                f"x must have shape ({', '.join(layout[:3])}, head_dim={self.head_dim}), got {_checks.shape_of(x)}"
            )
        seq_dim = 2 if layout == "BHTD" else 1
        seq_len = x.shape[seq_dim]
        _check_span("RotaryEmbedding", offset, seq_len, self.max_len)
        cos = self.cos[offset : offset + seq_len].to(x.dtype)  # (T, Dh)
        sin = self.sin[offset : offset + seq_len].to(x.dtype)  # (T, Dh)
        if layout == "BTHD":
            cos, sin = cos[:, None], sin[:, None]  # (T, 1, Dh): the same angle for every head
        return x * cos + self._rotate_90(x) * sin


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Per-head ALiBi slopes, as in the reference code of Press et al. (2022).

    For a power of two n the slopes are the geometric sequence starting at
    ``2^(-8/n)`` with that same ratio (8 heads: 1/2, 1/4, ..., 1/256). Otherwise the slopes
    of the closest smaller power of two are followed by every other slope of twice that
    power, until there are ``num_heads``.

    Args:
        num_heads: number of heads H.

    Returns:
        Float64 tensor of shape (H,).
    """
    if num_heads <= 0:
        raise ValueError(f"num_heads must be positive, got {num_heads}")

    def power_of_2(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_2(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        extra = alibi_slopes(2 * closest)[0::2][: num_heads - closest].tolist()
        slopes = power_of_2(closest) + extra
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int | None = None,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """ALiBi's additive attention bias: ``-slope_h * |i - j|``.

    Queries are the last ``q_len`` of ``k_len`` positions (offset ``k_len - q_len``), as in
    :func:`mtlib.masks.causal_mask`. Under a causal mask this is the paper's
    ``-m * (i - j)``; without one the bias is symmetric.

    Args:
        num_heads: number of heads H.
        q_len: number of queries Tq.
        k_len: number of keys Tk (default ``q_len``).
        device: device of the result.
        dtype: dtype of the result (default: torch's default dtype).

    Returns:
        Tensor of shape (1, H, Tq, Tk).
    """
    k_len = q_len if k_len is None else k_len
    if k_len < q_len:
        raise ValueError(f"k_len must be >= q_len, got q_len={q_len}, k_len={k_len}")
    dtype = torch.get_default_dtype() if dtype is None else dtype
    q_pos = torch.arange(k_len - q_len, k_len, device=device)[:, None]  # (Tq, 1)
    k_pos = torch.arange(k_len, device=device)[None, :]  # (1, Tk)
    distance = (q_pos - k_pos).abs().to(dtype)  # (Tq, Tk)
    slopes = alibi_slopes(num_heads).to(device=device, dtype=dtype)  # (H,)
    return -slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)
