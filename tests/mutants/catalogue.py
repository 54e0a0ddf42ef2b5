"""The bug zoo: realistic one-spot bugs in mtlib that the unit tests must catch.

Each :class:`Mutant` replaces ``original`` (an exact snippet that must occur exactly once in
``file``) by ``replacement``. ``python -m tests.mutants`` applies each mutant alone to a scratch
copy of the repository and runs the test files of :data:`MODULE_TESTS` for that file (or the
mutant's own ``tests``); a mutant is *killed* when a test fails. A mutant that cannot change any
result (an *equivalent* mutant) says why in ``equivalent``; it is run too, and must survive.

To add one, see CONTRIBUTING.md, "How to add a mutant": copy an entry, keep the edit minimal and
realistic, describe the bug in one line, run ``python -m tests.mutants ID``, and if it survives,
write the test that kills it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str  # short and stable: the module's letter and a number (A = attention, ...)
    file: str  # path from the repository root
    original: str  # exact snippet; must occur exactly once in ``file``
    replacement: str  # what the bug looks like
    description: str  # the bug, in one line
    equivalent: str | None = None  # why no test can kill it; None for a real bug
    tests: tuple[str, ...] | None = None  # test files to run instead of MODULE_TESTS[file]


#: The test files run for a mutant of each module, most specific first (``-x`` stops at the
#: first failure). Later modules import earlier ones, so their tests come too.
MODULE_TESTS: dict[str, tuple[str, ...]] = {
    "mtlib/masks.py": (
        "tests/test_masks.py",
        "tests/test_attention_edges.py",
        "tests/test_attention.py",
        "tests/test_api_traps.py",
        "tests/test_transformer.py",
    ),
    "mtlib/attention.py": (
        "tests/test_attention.py",
        "tests/test_attention_head_dim.py",
        "tests/test_attention_edges.py",
        "tests/test_efficient.py",
        "tests/test_api_traps.py",
        "tests/test_masks.py",
        "tests/test_blocks.py",
        "tests/test_transformer.py",
    ),
    "mtlib/positional.py": (
        "tests/test_positional.py",
        "tests/test_api_traps.py",
        "tests/test_attention.py",
        "tests/test_transformer.py",
    ),
    "mtlib/loading.py": (
        "tests/test_loading.py",
        "tests/test_attention.py",
        "tests/test_blocks.py",
        "tests/test_transformer.py",
    ),
    "mtlib/blocks.py": ("tests/test_blocks.py", "tests/test_transformer.py"),
    "mtlib/transformer.py": ("tests/test_transformer.py", "tests/test_api_traps.py"),
    "mtlib/models/bart.py": ("tests/test_models_bart.py",),
    "mtlib/models/t5.py": ("tests/test_models_t5_v11.py", "tests/test_models_t5.py", "tests/test_t5_init.py"),
    "mtlib/models/gpt.py": ("tests/test_models_gpt.py",),
}

_ATT, _MASKS, _POS = "mtlib/attention.py", "mtlib/masks.py", "mtlib/positional.py"
_BLOCKS, _TRF, _LOAD = "mtlib/blocks.py", "mtlib/transformer.py", "mtlib/loading.py"

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- attention.py (chapter 3-5)
    Mutant(
        "A01", _ATT,
        "scores = (q @ k.transpose(-2, -1)) * scale  # (..., Tq, Tk)",
        "scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)",
        "scaling dropped: softmax(Q K^T) V, saturating the softmax as d_k grows",
    ),
    Mutant(
        "A02", _ATT,
        "scale = q.shape[-1] ** -0.5 if scale is None else scale",
        "scale = q.shape[-1] ** -1.0 if scale is None else scale",
        "scaled by 1/d_k instead of 1/sqrt(d_k)",
    ),
    Mutant(
        "A03", _ATT,
        "scale = q.shape[-1] ** -0.5 if scale is None else scale",
        "scale = q.shape[-1] ** 0.5 if scale is None else scale",
        "multiplied by sqrt(d_k) instead of divided",
    ),
    Mutant(
        "A04", _ATT,
        "return scores.softmax(dim=-1)  # (..., Tq, Tk)",
        "return scores.softmax(dim=-2)  # (..., Tq, Tk)",
        "softmax over the queries (dim=-2) instead of the keys, unmasked path",
    ),
    Mutant(
        "A05", _ATT,
        "weights = scores.masked_fill(empty, 0.0).softmax(dim=-1)",
        "weights = scores.masked_fill(empty, 0.0).softmax(dim=-2)",
        "softmax over the queries (dim=-2) instead of the keys, masked path",
    ),
    Mutant(
        "A06", _ATT,
        "scores = scores.masked_fill(~mask, NEG_INF)  # (..., Tq, Tk)",
        "scores = scores.masked_fill(mask, NEG_INF)  # (..., Tq, Tk)",
        "mask inverted: the allowed keys are the ones hidden",
    ),
    Mutant(
        "A07", _ATT,
        "    if mask is not None:\n        scores = scores.masked_fill(~mask, NEG_INF)",
        "    if mask is not None:\n        return scores.softmax(dim=-1).masked_fill(~mask, 0.0)",
        "mask applied after the softmax: rows no longer sum to 1",
    ),
    Mutant(
        "A08", _ATT,
        'NEG_INF = float("-inf")',
        "NEG_INF = -1e9",
        "masked scores filled with -1e9 instead of -inf (a score below -1e9 then beats them)",
    ),
    Mutant(
        "A09", _ATT,
        "scores = scores.masked_fill(~mask, NEG_INF)  # (..., Tq, Tk)",
        "scores = scores.masked_fill(~mask, -1e9)  # (..., Tq, Tk)",
        "-1e9 fill where the empty-row test looks for -inf: fully masked rows get uniform weights",
    ),
    Mutant(
        "A10", _ATT,
        "return weights.masked_fill(empty, 0.0)  # (..., Tq, Tk), fully masked rows -> 0",
        "return weights  # (..., Tq, Tk)",
        "empty rows not zeroed: a query with nothing to attend to averages every value",
    ),
    Mutant(
        "A11", _ATT,
        "weights = scores.masked_fill(empty, 0.0).softmax(dim=-1)",
        "weights = scores.softmax(dim=-1)",
        "empty rows zeroed only after a NaN softmax: the output is 0 but the gradients are NaN",
    ),
    Mutant(
        "A12", _ATT,
        "return out.masked_fill(empty, 0.0)  # (B, H, Tq, Dh)",
        "return out  # (B, H, Tq, Dh)",
        "fused path: empty rows not zeroed (the kernel averages every value)",
    ),
    Mutant(
        "A13", _ATT,
        "x = x.transpose(1, 2)  # (B, T, H, Dh)\n        return x.reshape(batch, length, self.inner_dim)",
        "return x.reshape(batch, length, self.inner_dim)",
        "heads merged without transposing back: (B, H, T, Dh) reshaped straight to (B, T, d)",
    ),
    Mutant(
        "A14", _ATT,
        "x = x.view(batch, length, self.num_heads, self.head_dim)  # (B, T, H, Dh)\n"
        "        return x.transpose(1, 2)  # (B, H, T, Dh)",
        "return x.view(batch, self.num_heads, length, self.head_dim)  # (B, H, T, Dh)",
        "heads split with a view instead of view + transpose: tokens and heads mixed up",
    ),
    Mutant(
        "A15", _ATT,
        "            else:\n                k, v = self._append(k, v)",
        "            else:\n                pass  # new keys and values replace the cached ones",
        "KV cache not appended: each step sees only its own token",
    ),
    Mutant(
        "A16", _ATT,
        "past = 0 if cache is None or cache.static else cache.length  # positions already cached",
        "past = 0 if cache is None or cache.static else cache.length + 1",
        "KV-cache position offset off by one: RoPE rotates the new token one position too far",
    ),
    Mutant(
        "A17", _ATT,
        'k = self.rotary.rotate(k, layout="BHTD", offset=past)  # new keys at their positions',
        'k = self.rotary.rotate(k, layout="BHTD")  # new keys at their positions',
        "RoPE: cached decoding rotates every new key as if at position 0",
    ),
    Mutant(
        "A18", _ATT,
        "dropout_p = self.dropout if self.training else 0.0",
        "dropout_p = self.dropout",
        "attention dropout left on at evaluation time",
    ),
    Mutant(
        "A19", _ATT,
        "scores = self.score_proj(torch.tanh(q + k)).squeeze(-1)  # (B, Tq, Tk)",
        "scores = self.score_proj(q + k).squeeze(-1)  # (B, Tq, Tk)",
        "additive attention without tanh: linear, so the query no longer changes the weights",
    ),
    Mutant(
        "A20", _ATT,
        "weights = self.dropout(masked_softmax(scores, mask=mask))  # (B, Tq, Tk)",
        "weights = self.dropout(masked_softmax(scores))  # (B, Tq, Tk)",
        "additive attention ignores its mask",
    ),
    Mutant(
        "A21", _ATT,
        "if self.static:\n                return self.k, self.v",
        "if False:\n                return self.k, self.v",
        "cross-attention (static) cache appended to at every step instead of reused",
    ),
    Mutant(
        "A22", _ATT,
        "scores = (q @ k.transpose(-2, -1)) * scale  # (..., Tq, Tk)",
        "scores = (q @ k.mT) * scale  # (..., Tq, Tk)",
        "k.mT instead of k.transpose(-2, -1)",
        equivalent="k.mT is defined as k.transpose(-2, -1): the same tensor, not a bug",
    ),
    Mutant(
        "A23", _ATT,
        "weights = scores.masked_fill(empty, 0.0).softmax(dim=-1)",
        "weights = scores.masked_fill(empty, 1.0).softmax(dim=-1)",
        "empty rows made finite with 1.0 instead of 0.0 before the softmax",
        equivalent="any finite constant row gives the same uniform softmax, and those rows are "
        "zeroed afterwards with no gradient through them",
    ),
    Mutant(
        "A24", _ATT,
        "k = torch.cat([self.k, k], dim=2)  # (B, H, T_cached + T_new, Dh)",
        "k = k  # (B, H, T_cached + T_new, Dh)",
        "KV cache with gradients: new keys replace the cached ones (only the values are appended)",
    ),
    Mutant(
        "A25", _ATT,
        "buf_k[:, :, t : t + new] = k  # in place: the cached positions are not copied",
        "buf_k[:, :, t : t + new] = v  # in place: the cached positions are not copied",
        "KV cache buffer: values written where the keys go",
    ),
    Mutant(
        "A26", _ATT,
        "self._buffers[0][:, :, :t] = self.k  # the one copy of the cached positions",
        "pass  # the one copy of the cached positions",
        "KV cache growth forgets the cached keys when the buffer is reallocated",
    ),
    Mutant(
        "A27", _ATT,
        "if self._buffers is None or not self._holds(self._buffers, t + new):",
        "if self._buffers is None:",
        "KV cache writes past its buffer, or into a buffer that beam search replaced",
    ),
    Mutant(
        "A28", _ATT,
        "acc = acc * rescale + p @ v[..., j : j + block_size, :].to(work)  # (..., bq, d_v)",
        "acc = acc + p @ v[..., j : j + block_size, :].to(work)  # (..., bq, d_v)",
        "tiled attention: the running sum of values is not rescaled when the maximum rises",
    ),
    Mutant(
        "A29", _ATT,
        "stop = min(k_len, i + rows + offset) if causal else k_len  # later keys: all in the future",
        "stop = min(k_len, i + offset) if causal else k_len  # later keys: all in the future",
        "tiled causal attention skips the key block on the diagonal",
    ),
    Mutant(
        "A30", _ATT,
        "ref = new_max.masked_fill(new_max == NEG_INF, 0.0)  # no key seen yet: avoid inf - inf",
        "ref = new_max  # no key seen yet: avoid inf - inf",
        "tiled attention: a query with no visible key yet computes -inf - (-inf) = NaN",
    ),
    Mutant(
        "A31", _ATT,
        "factor = q.shape[-1] ** -0.5 if scale is None else scale  # 1 / sqrt(d_k) by default",
        "factor = 1.0 if scale is None else scale  # 1 / sqrt(d_k) by default",
        "tiled attention without the 1/sqrt(d_k) scaling",
    ),
    Mutant(
        "A32",
        _ATT,
        "empty = forbidden.all(dim=-1, keepdim=True)  # (..., Tq or 1, 1): nothing to attend to",
        "empty = (scores == NEG_INF).all(dim=-1, keepdim=True)  # (..., Tq, 1)",
        "empty rows read from the scores, not the mask: a row of -inf scores (a float16 overflow) "
        "is silently zero with a mask and NaN without one",
    ),
    Mutant(
        "A33", _ATT,
        "return x.reshape(batch, length, self.inner_dim)  # (B, T, H * Dh)",
        "return x.reshape(batch, length, self.d_model)  # (B, T, H * Dh)",
        "head_dim ignored when merging the heads: assumes num_heads * head_dim == d_model "
        "(T5 v1.1 / Flan-T5 attention fails)",
    ),
    Mutant(  # issue 25's K1
        "A36", _ATT,
        "size = (*self.k.shape[:2], max(2 * (t + new), 16), self.k.shape[3])",
        "size = (*self.k.shape[:2], max(2 * t, 16), self.k.shape[3])",
        "KV cache growth sized from the cached length alone: a chunk longer than it overflows",
    ),
    Mutant(
        "A34", _ATT,
        "    def __copy__(self) -> KVCache:\n",
        "    def _unused_copy(self) -> KVCache:\n",
        "KVCache without __copy__: copy.copy shares the growth buffer, branches overwrite each other",
    ),
    Mutant(
        "A35", _ATT,
        "ours = ours.to(m.out_proj.weight).train(m.training)  # same device, dtype and mode",
        "ours = ours.to(m.out_proj.weight)  # same device and dtype",
        "MultiHeadAttention.from_torch of an eval-mode module gives a train-mode copy (dropout on)",
    ),
    Mutant(
        "A37",
        _ATT,
        "if dtype in _HALF:  # q k^T can pass float16's 65504 before scaling: work in float32\n"
        "        q, k, v = q.float(), k.float(), v.float()",
        "if dtype in _HALF:  # q k^T can pass float16's 65504 before scaling: work in float32\n"
        "        pass",
        "float16/bfloat16 computed in their own dtype: q k^T overflows float16 before the "
        "scaling (NaN), and bfloat16's error is twice PyTorch's",
    ),
    Mutant(  # review of chapter 6, F28
        "A38", _ATT,
        "    if k_len > 1 and bias.shape[-1] == 1:  # the same value for every key: the softmax removes it\n",
        "    if False:  # the same value for every key: the softmax removes it\n",
        "a bias with key dimension 1 (alibi_bias(H, 1) in a cached decoder) broadcasts over every "
        "key and cancels in the softmax: no positions at all, and no error",
    ),
    Mutant(  # review of chapter 12, section 5.1
        "A39", _ATT,
        "    work = torch.float32 if q.dtype in _HALF else q.dtype  # half: accumulate in float32\n",
        "    work = q.dtype  # half: accumulate in float32\n",
        "tiled_attention accumulates m, l and acc in float16/bfloat16: 5x (fp16) and 4x (bf16) the "
        "explicit path's error over 611 keys",
    ),
    # ------------------------------------------------------------------- masks.py (chapter 5)
    Mutant(
        "M01", _MASKS,
        "return ones.tril(diagonal=k_len - q_len)  # (Tq, Tk)",
        "return ones.tril(diagonal=k_len - q_len + 1)  # (Tq, Tk)",
        "causal mask off by one above the diagonal: each query sees the next token",
    ),
    Mutant(
        "M02", _MASKS,
        "return ones.tril(diagonal=k_len - q_len)  # (Tq, Tk)",
        "return ones.tril(diagonal=k_len - q_len - 1)  # (Tq, Tk)",
        "causal mask off by one below the diagonal: a query cannot see its own token",
    ),
    Mutant(
        "M03", _MASKS,
        "return ones.tril(diagonal=k_len - q_len)  # (Tq, Tk)",
        "return ones.tril()  # (Tq, Tk)",
        "causal mask top-left aligned: with a KV cache the new queries lose the cached keys",
    ),
    Mutant(
        "M04", _MASKS,
        "mask = positions < lengths[:, None]  # (B, T)",
        "mask = positions <= lengths[:, None]  # (B, T)",
        "padding mask off by one: the first padding token is attended to",
    ),
    Mutant(
        "M05", _MASKS,
        "mask = positions < lengths[:, None]  # (B, T)",
        "mask = positions >= lengths[:, None]  # (B, T)",
        "padding mask inverted: only the padding is attended to",
    ),
    Mutant(
        "M06", _MASKS,
        "return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)",
        "return (tokens == pad_id)[:, None, None, :]  # (B, 1, 1, T)",
        "padding mask from tokens with the wrong sign",
    ),
    Mutant(
        "M07", _MASKS,
        "return ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk), True = may attend",
        "return key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk), True = may attend",
        "PyTorch's key_padding_mask (True = ignore) used without flipping the sign",
    ),
    Mutant(
        "M08", _MASKS,
        "return ~attn_mask  # (Tq, Tk)",
        "return attn_mask  # (Tq, Tk)",
        "PyTorch's attn_mask (True = ignore) used without flipping the sign",
    ),
    Mutant(
        "M09", _MASKS,
        "return ~attn_mask.reshape(bh // num_heads, num_heads, q_len, k_len)",
        "return ~attn_mask.reshape(num_heads, bh // num_heads, q_len, k_len).transpose(0, 1)",
        "PyTorch's (B*H, Tq, Tk) attn_mask split heads-major instead of batch-major",
    ),
    Mutant(
        "M10", _MASKS,
        "out = out & m  # broadcast",
        "out = out | m  # broadcast",
        "masks combined with OR: padding OR causal lets padded keys and the future through",
    ),
    Mutant(
        "M11", _MASKS,
        'return bias.masked_fill(~mask, float("-inf"))',
        'return bias.masked_fill(mask, float("-inf"))',
        "boolean mask turned into a bias with the wrong sign",
    ),
    Mutant(
        "M12",
        _MASKS,
        "return mask_batch == 1 and batch is not None and batch > 1",
        "return False",
        "empty-row refusal only for 2-D masks: a (1, 1, T, T) tril(diagonal=-1) or all-False mask "
        "passes silently, although it is the same for every sequence of the batch",
    ),
    Mutant(
        "M13",
        _MASKS,
        'f"here. {_empty_row_advice(table, q_len, k_len)}"',
        'f"here. A PyTorch-style mask (True = ignore) must be inverted, e.g. with masks.from_attn_mask"',
        "the empty-row refusal advises inverting every such mask: tril(diagonal=-1) inverted is "
        "triu(), which shows every query its future and passes every check",
    ),
    Mutant(
        "M14",
        _MASKS,
        "        mask.dim() == 2\n        and mask.shape[0] == q_len == batch\n",
        "        False  # a 2-D mask is always (q_len, k_len)\n        and mask.shape[0] == q_len == batch\n",
        "no ambiguity refusal: a (B, k_len) padding mask with B == q_len is silently read as a "
        "(q_len, k_len) mask shared by every sequence",
    ),
    Mutant(
        "M15",
        _MASKS,
        "return k_len >= q_len and torch.equal(mask, causal_mask(q_len, k_len, device=mask.device))",
        "return False",
        "the ambiguity refusal also refuses the exact causal_mask(q_len, k_len) when B == q_len, "
        "the most common 2-D mask",
    ),
    # ------------------------------------------------------------- positional.py (chapter 6)
    Mutant(
        "P01", _POS,
        "pe[:, 0::2] = torch.sin(angles)\n    pe[:, 1::2] = torch.cos(angles)",
        "pe[:, 0::2] = torch.cos(angles)\n    pe[:, 1::2] = torch.sin(angles)",
        "sinusoidal encoding: sin and cos swapped",
    ),
    Mutant(
        "P02", _POS,
        "angles = pos / base ** (two_i / d_model)  # (L, d/2)",
        "angles = pos / base ** (two_i / 2 / d_model)  # (L, d/2)",
        "sinusoidal encoding: frequency exponent i/d instead of 2i/d",
    ),
    Mutant(
        "P03", _POS,
        "angles = pos / base ** (two_i / d_model)  # (L, d/2)",
        "angles = pos * base ** (two_i / d_model)  # (L, d/2)",
        "sinusoidal encoding: exponent sign flipped (wavelengths shrink instead of grow)",
    ),
    Mutant(
        "P04", _POS,
        "pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)",
        "pos = torch.arange(1, max_len + 1, dtype=torch.float64)[:, None]  # (L, 1)",
        "positions counted from 1 instead of 0",
    ),
    Mutant(
        "P05", _POS,
        "pe = self.pe[offset : offset + x.shape[1]].to(x.dtype)  # (T, d_model)",
        "pe = self.pe[: x.shape[1]].to(x.dtype)  # (T, d_model)",
        "sinusoidal encoding ignores the decode offset: every cached step is position 0",
    ),
    Mutant(
        "P06", _POS,
        "positions = torch.arange(offset, offset + x.shape[1], device=x.device)  # (T,)",
        "positions = torch.arange(x.shape[1], device=x.device)  # (T,)",
        "learned encoding ignores the decode offset",
    ),
    Mutant(
        "P07", _POS,
        "return torch.cat([-second, first], dim=-1)  # (..., Dh)",
        "return torch.cat([second, -first], dim=-1)  # (..., Dh)",
        "RoPE (rotate-half) rotates by -angle: the sign of the 90-degree rotation flipped",
    ),
    Mutant(
        "P08", _POS,
        "return torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)",
        "return torch.stack([pairs[..., 1], -pairs[..., 0]], dim=-1).flatten(-2)",
        "RoPE (interleaved) rotates by -angle",
    ),
    Mutant(
        "P09", _POS,
        "angles = torch.cat([angles, angles], dim=-1)  # (L, Dh): t0 t1 ... t0 t1 ...",
        "angles = angles.repeat_interleave(2, dim=-1)  # (L, Dh)",
        "RoPE: rotate-half pairing with the interleaved angle table (channel pairs get "
        "different angles)",
    ),
    Mutant(
        "P10", _POS,
        "cos = self.cos[offset : offset + seq_len].to(x.dtype)  # (T, Dh)\n"
        "        sin = self.sin[offset : offset + seq_len].to(x.dtype)  # (T, Dh)",
        "cos = self.cos[:seq_len].to(x.dtype)  # (T, Dh)\n"
        "        sin = self.sin[:seq_len].to(x.dtype)  # (T, Dh)",
        "RoPE ignores the offset",
    ),
    Mutant(
        "P11", _POS,
        "return [start * start**i for i in range(n)]",
        "return [start * start**i for i in reversed(range(n))]",
        "ALiBi slopes reversed across heads",
    ),
    Mutant(
        "P12", _POS,
        "return -slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)",
        "return slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)",
        "ALiBi bias with the wrong sign: distant keys favoured",
    ),
    Mutant(
        "P13", _POS,
        "q_pos = torch.arange(k_len - q_len, k_len, device=device)[:, None]  # (Tq, 1)",
        "q_pos = torch.arange(q_len, device=device)[:, None]  # (Tq, 1)",
        "ALiBi: queries placed at the first positions, not the last (KV-cache decoding)",
    ),
    Mutant(
        "P14", _POS,
        "buckets = buckets + (relative_position > 0).long() * num_buckets",
        "buckets = buckets + (relative_position < 0).long() * num_buckets",
        "T5 buckets: past and future halves swapped",
    ),
    Mutant(
        "P15", _POS,
        "distance = (-relative_position).clamp(min=0)  # future keys -> distance 0",
        "distance = relative_position.clamp(min=0)  # future keys -> distance 0",
        "T5 causal buckets: distance measured to the future instead of the past",
    ),
    Mutant(
        "P16", _POS,
        "is_small = distance < max_exact",
        "is_small = distance <= max_exact",
        "T5 buckets: exact range off by one",
        equivalent="at distance == max_exact the log branch gives the same bucket: "
        "max_exact + int(log(1) * ...) = max_exact",
    ),
    Mutant(
        "P17", _POS,
        "large = large.clamp(max=num_buckets - 1)",
        "large = large",
        "T5 buckets: far distances not clamped to the last bucket",
    ),
    Mutant(
        "P18", _POS,
        "k_pos - q_pos,\n            bidirectional=self.bidirectional,",
        "q_pos - k_pos,\n            bidirectional=self.bidirectional,",
        "T5 bias: relative position taken as query - key",
    ),
    Mutant(
        "P19", _POS,
        "offset = k_len - q_len if offset is None else offset",
        "offset = 0 if offset is None else offset",
        "T5 bias: queries placed at the first positions, not the last (KV-cache decoding)",
    ),
    # ---------------------------------------------------------------- loading.py (chapter 4)
    Mutant(
        "L01", _LOAD,
        'for part, chunk in zip("qkv", value.chunk(3, dim=0), strict=True):',
        'for part, chunk in zip("qvk", value.chunk(3, dim=0), strict=True):',
        "k and v weights swapped when unpacking PyTorch's in_proj_weight",
    ),
    Mutant(
        "L02", _LOAD,
        "if missing:\n        raise",
        "if False:\n        raise",
        "a weight table that misses a tensor loads anyway (that tensor stays random)",
    ),
    # -------------------------------------------------------------------- blocks.py (chapter 7)
    Mutant(
        "B01", _BLOCKS,
        "if self.norm_first:  # Pre-LN",
        "if not self.norm_first:  # Pre-LN",
        "Pre-LN and Post-LN swapped",
    ),
    Mutant(
        "B02", _BLOCKS,
        "return norm(x + dropout(sublayer(x)))  # Post-LN",
        "return norm(dropout(sublayer(x)))  # Post-LN",
        "Post-LN residual connection dropped",
    ),
    Mutant(
        "B03", _BLOCKS,
        "return x + dropout(sublayer(norm(x)))",
        "return dropout(sublayer(norm(x)))",
        "Pre-LN residual connection dropped",
    ),
    Mutant(
        "B04", _BLOCKS,
        "return x + dropout(sublayer(norm(x)))",
        "return norm(x) + dropout(sublayer(norm(x)))",
        "Pre-LN residual adds the normalised input instead of the raw stream",
    ),
    Mutant(
        "B05", _BLOCKS,
        "return x + dropout(sublayer(norm(x)))",
        "return x + sublayer(norm(x))",
        "residual dropout forgotten (Pre-LN)",
    ),
    Mutant(
        "B06", _BLOCKS,
        "hidden = self.activation(self.linear1(x))  # (..., d_ff)",
        "hidden = self.linear1(x)  # (..., d_ff)",
        "feed-forward without its activation: two linears collapse into one",
    ),
    Mutant(
        "B07", _BLOCKS,
        "self.activation = ACTIVATIONS[activation]()",
        "self.activation = nn.ReLU()",
        "wrong activation: the activation setting is ignored (always ReLU)",
    ),
    Mutant(
        "B08", _BLOCKS,
        "hidden = self.activation(self.w1(x)) * self.w3(x)  # (..., d_ff)",
        "hidden = self.w1(x) * self.activation(self.w3(x))  # (..., d_ff)",
        "SwiGLU: SiLU on the up projection instead of the gate",
    ),
    Mutant(
        "B09", _BLOCKS,
        "return self.linear2(self.dropout(hidden))",
        "return self.linear2(F.dropout(hidden, p=self.dropout.p))",
        "functional dropout without training=self.training: still on at evaluation",
    ),
    Mutant(
        "B10", _BLOCKS,
        "self.norm1, self.norm2, self.norm3 = _layer_norm(c), _layer_norm(c), _layer_norm(c)",
        "self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(c.d_model, bias=c.bias) for _ in range(3))",
        "DecoderBlock LayerNorms ignore layer_norm_eps",
    ),
    Mutant(
        "B11", _BLOCKS,
        "return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)",
        "return nn.LayerNorm(config.d_model, bias=config.bias)",
        "every block LayerNorm ignores layer_norm_eps",
    ),
    Mutant(
        "B12", _BLOCKS,
        "return self.cross_attn(h, memory, memory, mask=memory_mask, cache=cross)[0]",
        "return self.cross_attn(h, h, h, cache=cross)[0]",
        "cross-attention on the wrong states: the decoder attends to itself, not the encoder",
    ),
    Mutant(
        "B13", _BLOCKS,
        "return self.cross_attn(h, memory, memory, mask=memory_mask, cache=cross)[0]",
        "return self.cross_attn(h, memory, memory, cache=cross)[0]",
        "cross-attention ignores the source padding mask",
    ),
    Mutant(
        "B14", _BLOCKS,
        "for cache in (self.self_attn, self.cross_attn):",
        "for cache in (self.cross_attn,):",
        "beam search: the self-attention cache is not reordered with its beams",
    ),
    Mutant(
        "B15", _BLOCKS,
        "norm_first=layer.norm_first,",
        "norm_first=False,",
        "loading a PyTorch layer ignores its norm_first",
    ),
    Mutant(
        "B16", _BLOCKS,
        "layer_norm_eps=layer.norm1.eps,",
        "",
        "loading a PyTorch layer ignores its LayerNorm epsilon",
    ),
    # ----------------------------------------------------------- transformer.py (chapters 7-10)
    Mutant(
        "T01", _TRF,
        "x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T, d_model)",
        "x = embedding(tokens)  # (B, T, d_model)",
        "token embeddings not scaled by sqrt(d_model)",
    ),
    Mutant(
        "T02", _TRF,
        "return causal if pad is None else causal & pad  # (B, 1, T, T)",
        "return causal if pad is None else pad  # (B, 1, T, T)",
        "decoder not causal: the target mask keeps the padding and drops the causal part",
    ),
    Mutant(
        "T03", _TRF,
        "offset = cached if offset is None else offset",
        "offset = 0 if offset is None else offset",
        "decode offset ignored: every cached step gets position 0",
    ),
    Mutant(
        "T04", _TRF,
        "tgt_mask = causal_mask(tgt.shape[1], cached + tgt.shape[1], device=tgt.device)",
        "tgt_mask = None",
        "cached decoding of several new tokens at once without a causal mask",
    ),
    Mutant(
        "T05", _TRF,
        "memory, memory_mask = model.encode(src), model.src_mask(src)  # (B, S, d), (B, 1, 1, S)",
        "memory, memory_mask = model.encode(src), None  # (B, S, d), (B, 1, 1, S)",
        "greedy decoding ignores the source padding mask",
    ),
    Mutant(
        "T06", _TRF,
        "return self.decode(tgt, memory, memory_mask=memory_mask, tgt_mask=tgt_mask)",
        "return self.decode(tgt, memory, tgt_mask=tgt_mask)",
        "teacher-forced forward: cross-attention ignores the source padding",
    ),
    Mutant(
        "T07", _TRF,
        "return ((5.0 + length) / 6.0) ** alpha",
        "return ((5.0 + length) / 6.0) ** -alpha",
        "beam search length penalty with the wrong sign (favours short hypotheses)",
    ),
    Mutant(
        "T08", _TRF,
        "parent = (first_row + flat // vocab).view(-1)",
        "parent = (flat // vocab).view(-1)",
        "beam search: parent index forgets the batch offset (sources swap beams)",
    ),
    Mutant(
        "T09", _TRF,
        "for layer_cache in cache:\n                layer_cache.reorder(parent)",
        "for layer_cache in cache:\n                pass",
        "beam search: KV cache not reordered when beams move",
    ),
    Mutant(
        "T10", _TRF,
        "next_token = _forbid_pad(logits, model).argmax(dim=-1).masked_fill(done, fill)  # (B,)",
        "next_token = _forbid_pad(logits, model).argmax(dim=-1)  # (B,)",
        "greedy decoding keeps generating after EOS",
    ),
    Mutant(
        "T11", _TRF,
        "return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)",
        "return nn.LayerNorm(config.d_model, bias=config.bias)",
        "final LayerNorm of the stacks ignores layer_norm_eps",
    ),
    Mutant(
        "T12", _TRF,
        "self.lm_head.weight = self.tgt_embed.weight",
        "self.lm_head.weight = self.src_embed.weight",
        "output projection tied to the source embedding instead of the target one",
    ),
    Mutant(
        "T13", _TRF,
        "config.num_decoder_layers = len(model.decoder.layers)",
        "pass",
        "from_torch builds as many decoder layers as encoder layers",
    ),
    Mutant(  # issue 25's TF1
        "T14", _TRF,
        "first_eos = torch.where(is_eos.any(dim=1), is_eos.float().argmax(dim=1) + 1, ys.shape[1] - 1)",
        "first_eos = torch.where(is_eos.any(dim=1), is_eos.float().argmax(dim=1), ys.shape[1] - 1)",
        "beam search's final pick leaves the EOS out of a finished beam's length",
    ),
    Mutant(  # review of chapter 8, F17
        "T15", _TRF,
        "        elif memory_mask is None and src_mask.dim() >= 2 and src_mask.shape[-2] > 1:\n",
        "        elif False:\n",
        "forward() reuses a (B, 1, S, S) encoder mask as the cross-attention mask: silent when T = S",
    ),
    Mutant(  # review of chapter 8, F19
        "T16", _TRF,
        "    if model.training and _has_dropout(model):\n",
        "    if False:\n",
        "greedy_decode / beam_search in training mode with dropout: random outputs, no warning",
    ),
    Mutant(  # review of chapter 8, F18
        "A45", _ATT,
        "            cache.check_source(key)  # the memory it was filled from, not a new source\n",
        "",
        "a filled cross-attention cache serves the previous source's keys and values to a new one",
    ),
    Mutant(  # issue 25, the decode step without a mask
        "A46", _ATT,
        "        if is_causal and q_len == 1:  # one query, the last position: it may see every key\n",
        "        if is_causal and q_len <= 2:  # one query, the last position: it may see every key\n",
        "is_causal dropped for two queries too: the first of a 2-token chunk sees the second",
    ),
    # ---------------------------------------------------------------- models/ (chapters 9-15)
    Mutant(
        "D01", "mtlib/models/bart.py",
        "        self._zero_padding_row()\n",
        "",
        "BART init: the tied head's normal_ re-fills the padding row that _init_weights zeroed",
    ),
    Mutant(
        "D02", "mtlib/models/t5.py",
        "hidden = self.act(self.wi_0(x)) * self.wi_1(x)  # (..., d_ff)",
        "hidden = self.wi_0(x) * self.act(self.wi_1(x))  # (..., d_ff)",
        "T5 v1.1 gated GELU with gate and linear half swapped: GELU on wi_1 instead of wi_0",
    ),
    Mutant(  # review of chapter 14, 5.1
        "D04", "mtlib/models/t5.py",
        "        return _clamp_float16(x + self.dropout(self.ff(self.ff_norm(x))))\n",
        "        return x + self.dropout(self.ff(self.ff_norm(x)))\n",
        "T5 in float16: the feed-forward sum not clamped as Hugging Face does (inf, then NaN logits)",
    ),
    Mutant(  # review of chapter 14, 1.5 / 5.2
        "D05", "mtlib/models/t5.py",
        "            nn.init.normal_(self.lm_head.weight, std=c.d_model**-0.5)\n",
        "            nn.init.normal_(self.lm_head.weight, std=1.0)\n",
        "T5 v1.1's untied head drawn from N(0, 1) (Hugging Face's init): logits sqrt(d_model) too large",
    ),
    Mutant(  # issue 25's G4
        "D03", "mtlib/models/gpt.py",
        "        logits = logits.float() / temperature\n"
        "        if top_k is not None:\n"
        "            logits = top_k_filter(logits, top_k)\n"
        "        if top_p is not None:\n"
        "            logits = top_p_filter(logits, top_p)\n",
        "        logits = logits.float()\n"
        "        if top_k is not None:\n"
        "            logits = top_k_filter(logits, top_k)\n"
        "        if top_p is not None:\n"
        "            logits = top_p_filter(logits, top_p)\n"
        "        logits = logits / temperature\n",
        "sampling: the temperature applied after the top-k/top-p filters (top-p keeps too few)",
    ),
    Mutant(  # issue 25, logits of the last position only
        "D06", "mtlib/models/gpt.py",
        "        if last_only:\n            x = x[:, -1:]  # (B, 1, d_model)\n",
        "        if last_only:\n            x = x[:, :1]  # (B, 1, d_model)\n",
        "GPT(last_only=True) returns the first position's logits: generation continues from the "
        "wrong position",
    ),
    Mutant(
        "C01", "mtlib/data/corpus.py",
        "    if digest != _TOPICS_SHA256:\n",
        "    if digest != _TOPICS_SHA256 and False:\n",
        "corpus: the shipped text's checksum never checked (another Python's topics accepted)",
        tests=("tests/test_data.py",),
    ),
    Mutant(
        "C02", "mtlib/experiments/char_lm.py",
        "    topics = pydoc_topics()\n",
        "    from pydoc_data.topics import topics\n",
        "chapter 10's corpus read from the running Python again (moves with every release)",
        tests=("tests/test_data.py",),
    ),
    Mutant(
        "X01", "mtlib/models/transformer_xl.py",
        "    if bool((mask & future).any()):\n",
        "    if bool((mask & future).all()):\n",
        "Transformer-XL: a mask that sees later keys accepted unless it sees only later keys",
        tests=("tests/test_models_transformer_xl.py",),
    ),
    Mutant(
        "X02", "mtlib/models/transformer_xl.py",
        "            if mem.dtype != p.dtype or mem.device != p.device:\n",
        "            if mem.device != p.device:\n",
        "Transformer-XL: memories of another dtype accepted (they fail later, inside LayerNorm, without naming mems)",
        tests=("tests/test_models_transformer_xl.py",),
    ),
    Mutant(  # review of chapter 11, F10
        "E01", "mtlib/experiments/digits.py",
        "        occluded[..., rows, cols] = fill[..., rows, cols] if isinstance(fill, Tensor) else fill\n",
        "        occluded[..., rows, cols] = fill.mean() if isinstance(fill, Tensor) else fill\n",
        "occlusion with a tensor fill: one grey value instead of the replacement's pixels at the patch",
        tests=("tests/test_digits_experiment.py",),
    ),
]
