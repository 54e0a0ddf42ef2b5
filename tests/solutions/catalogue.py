"""For every self-check: typical bugs it must reject, and correct variants it must accept.

``BUGS[checker]`` lists ``Bug(what, fn, match)``: ``fn`` is a typical wrong answer, ``match`` a
regular expression the checker's message must contain (the failed case and, where the checker
knows the mistake, its hint). ``VARIANTS[checker]`` lists correct answers written differently from
the reference (``-1e9`` vs ``-inf`` fill, einsum vs matmul, library calls). Most wrong answers are
the ones the chapter tests (``tests/test_exercises_*.py``) already use; they are imported, not
copied. ``tests/test_solutions.py`` runs all of them; ``python -m tests.solutions.catalogue``
prints the table of checkers and the bugs they catch (markdown), and ``--write`` puts it into
the instructor guide (book/instructors.md), whose table a test compares with this one.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from tests import test_exercises as t01
from tests import test_exercises_ch02 as t02
from tests import test_exercises_ch03 as t03
from tests import test_exercises_ch04 as t04
from tests import test_exercises_ch05 as t05
from tests import test_exercises_ch06 as t06
from tests import test_exercises_ch07 as t07
from tests import test_exercises_ch08 as t08
from tests import test_exercises_ch09 as t09
from tests import test_exercises_ch10 as t10
from tests import test_exercises_ch11 as t11
from tests import test_exercises_ch12 as t12
from tests import test_exercises_ch13 as t13
from tests import test_exercises_ch14 as t14
from tests import test_exercises_ch15 as t15


@dataclass(frozen=True)
class Bug:
    """A typical wrong answer and the part of the checker's message it must produce."""

    what: str
    fn: Callable[..., Any]
    match: str


# ------------------------------------------------------------------------- extra wrong answers
def _sdpa_einsum(q, k, v, mask=None):  # correct: einsum instead of matmul, -1e9 fill
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return torch.einsum("...qk,...kv->...qv", scores.softmax(-1), v)


def _sdpa_renormalised(q, k, v, mask=None):  # correct: zero after the softmax, then renormalise
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(-1, keepdim=True)
    return weights @ v


def _entropy_log2(w):
    return -(w * w.log2()).sum(-1)


def _rope_exponent_i(x, positions):
    d = x.shape[-1]
    theta = 10000 ** (-torch.arange(d // 2) / d)  # forgot the 2
    angles = positions[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        [a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()], -1
    ).flatten(-2)


def _rope_complex(x, positions):  # correct: complex multiplication
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2).double() / d)
    rot = torch.polar(
        torch.ones(len(positions), d // 2, dtype=torch.float64), positions.double()[:, None] * theta
    )
    z = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * rot).flatten(-2).float()


def _greedy_while_true(step, *, bos_id, eos_id, max_len):  # correct: a different loop shape
    out = torch.tensor([bos_id])
    for _ in range(max_len - 1):
        nxt = step(out.tolist()).argmax()
        out = torch.cat([out, nxt.view(1)])
        if int(nxt) == eos_id:
            return out
    return out


def _greedy_argmin(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    while len(tokens) < max_len:
        tokens.append(int(step(tokens).argmin()))
        if tokens[-1] == eos_id:
            break
    return tokens


def _smoothing_manual_kl(logits, targets, epsilon):  # correct: (1-eps) NLL + eps * mean(-log p)
    log_p = torch.log_softmax(logits, -1)
    nll = -log_p.gather(-1, targets[:, None]).squeeze(-1)
    return ((1 - epsilon) * nll - epsilon * log_p.mean(-1)).mean()


def _mlm_labels_from_inputs(ids, **kw):  # labels read from the corrupted inputs
    inputs, labels = t09.masking(ids, **kw)
    return inputs, torch.where(labels != -100, inputs, labels)


def _distill_no_t2(s, t, y, temperature, alpha):
    return t09.distill(s, t, y, temperature, alpha) - alpha * (temperature**2 - 1) * _kl(
        s, t, temperature
    )


def _kl(s, t, temperature):
    return torch.nn.functional.kl_div(
        torch.log_softmax(s / temperature, -1),
        torch.softmax(t / temperature, -1),
        reduction="batchmean",
    )


def _distill_reversed(s, t, y, temperature, alpha):
    hard = torch.nn.functional.cross_entropy(s, y)
    return alpha * temperature**2 * _kl(t, s, temperature) + (1 - alpha) * hard


def _distill_hard_teacher(s, t, y, temperature, alpha):
    soft = torch.nn.functional.kl_div(
        torch.log_softmax(s / temperature, -1), torch.softmax(t, -1), reduction="batchmean"
    )
    return alpha * temperature**2 * soft + (1 - alpha) * torch.nn.functional.cross_entropy(s, y)


# ------------------------------------------------------------------------------- the catalogue
VARIANTS: dict[str, list[Callable[..., Any]]] = {
    "check_softmax": [
        t01.good_softmax,
        lambda x, temperature=1.0: torch.softmax(x / temperature, -1),
    ],
    "check_soft_lookup": [
        t01.good_lookup,
        lambda q, k, v, m: torch.einsum(
            "bmn,bnv->bmv",
            torch.softmax(torch.einsum("bmd,bnd->bmn", q, k).masked_fill(~m[:, None], -1e9), -1),
            v,
        ),
        lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=m[:, None, :], scale=1.0
        ),
    ],
    "check_laplace_regression": [t01.good_laplace],
    "check_apply_merges": [t02.library_apply_merges, t02.tuple_apply_merges, t02.rank_min_apply_merges],
    "check_longest_match": [t02.good_longest_match, t02.sorted_regex_longest_match, t02.recursive_longest_match],
    "check_tied_logits": [t02.einsum_tied_logits, t02.linear_tied_logits],
    "check_scaled_dot_product_attention": [
        t03.minus_1e9,
        t03.torch_sdpa,
        _sdpa_einsum,
        _sdpa_renormalised,
        t03.stable_softmax,
    ],
    "check_self_attention_layer": [t03.good_layer],
    "check_attention_entropy": [lambda w: -(w * w.clamp_min(1e-30).log()).sum(-1)],
    "check_multi_head_loop": [
        t04.loop_project_then_slice,
        t04.loop_sum_of_out_rows,
        t04.loop_without_b_k,
        t04.loop_numpy_style_softmax,
    ],
    "check_unpack_in_proj": [t04.unpack_split_mT, t04.unpack_unflatten, t04.unpack_by_index],
    "check_grouped_query_attention": [
        t04.gqa_repeat_interleave,
        t04.gqa_expand,
        t04.gqa_torch_enable_gqa,
        t04.gqa_head_loop,
    ],
    "check_causal_mask": [
        t05.good_causal,
        t05.good_causal_arange,
        lambda n: ~torch.ones(n, n, dtype=torch.bool).triu(1),
    ],
    "check_padding_mask": [
        t05.good_padding,
        lambda lengths, max_len: (lengths[:, None] > torch.arange(max_len))[:, None, None, :],
    ],
    "check_combined_mask": [t05.good_combined, t05.good_combined_by_hand],
    "check_rope_rotation": [t06.mtlib_rope, _rope_complex],
    "check_sinusoidal_positions": [t06.rows_from_page, t06.rows_by_loops],
    "check_alibi_positions": [t06.alibi_at_loops],
    "check_swiglu_width": [t07.swiglu_width_by_count],
    "check_swiglu_ffn": [t07.good_swiglu_by_hand],
    "check_rms_norm_by_hand": [t07.good_rms_functional, t07.good_rms_norm_of_vector],
    "check_parallel_block": [t07.parallel_twice_normed],
    "check_shift_right": [t08.good_shift_roll],
    "check_greedy_decode": [t08.good_greedy_tensor, _greedy_while_true],
    "check_label_smoothing_loss": [t08.good_smoothing_torch, _smoothing_manual_kl],
    "check_mlm_masking": [t09.masking, t09.mask_tokens],
    "check_masked_mean_pool": [t09.good_pool_einsum, t09.good_pool_masked_fill],
    "check_distillation_loss": [t09.distill],
    "check_top_k_probs": [t10.good_top_k_sorted, t10.good_top_k_scatter],
    "check_min_p_probs": [t10.good_min_p_probs],
    "check_causal_lm_loss": [t10.good_loss_transposed, t10.good_loss_gather],
    "check_unpatchify": [t11.good_unpatchify_fold, t11.good_unpatchify_loop],
    "check_rollout_by_layer": [t11.good_by_layer, t11.good_by_layer_rows],
    "check_online_softmax": [t12.good_merge, t12.good_merge_logsumexp],
    "check_kv_cache_append": [t12.good_append_doubling],
    "check_shard_indices": [t13.good_shards_arithmetic, t13.good_shards_sampler],
    "check_allreduce_mean": [t13.good_allreduce_loop],
    "check_ring_allreduce_bytes": [t13.good_bytes_by_chunks],
    "check_rms_norm": [t14.good_rms_rsqrt, t14.good_rms_library],
    "check_sentinel_spans": [t14.good_spans_lists],
    "check_text_infilling": [t14.good_infill],
    "check_rel_shift": [t15.shift_by_gather],
    "check_update_memory": [t15.update_variant],
}

BUGS: dict[str, list[Bug]] = {
    "check_softmax": [
        Bug(
            "one maximum for the whole tensor, not one per row",
            t01.global_max_softmax,
            r"case 6 of 8 .*NaN or inf.*\nHint: subtract each row's own maximum",
        ),
        Bug(
            "no max subtraction (overflow at 1000)",
            t01.naive_softmax,
            r"case 5 of 8 .*NaN or inf.*\nHint: exp\(1000\) overflows",
        ),
        Bug(
            "softmax over the wrong axis",
            lambda x, temperature=1.0: torch.softmax(x, dim=0),
            r"case 2 of 8 .*largest error",
        ),
        Bug(
            "temperature ignored",
            lambda x, temperature=1.0: torch.softmax(x, dim=-1),
            r"case 3 of 8 .*\nHint: divide the scores by the temperature",
        ),
        Bug(
            "temperature multiplied",
            lambda x, temperature=1.0: torch.softmax(x * temperature, -1),
            r"case 3 of 8 .*Hint: divide",
        ),
        Bug("input edited in place", t01.in_place_softmax, r"changed its input tensor in place"),
        Bug(
            "a fixed dim=1 instead of the last dimension",
            lambda x, temperature=1.0: torch.softmax(x / temperature, dim=1 if x.dim() > 1 else 0),
            r"case 7 of 8 .*largest error",
        ),
        Bug(
            "a power of the softmax for the temperature",
            lambda x, temperature=1.0: (lambda p: p / p.sum(-1, keepdim=True))(
                torch.softmax(x, -1) ** (1 / temperature)
            ),
            r"case 8 of 8 .*NaN or inf.*\nHint: divide the scores by the temperature before",
        ),
    ],
    "check_soft_lookup": [
        Bug(
            "missing transpose of the keys",
            lambda q, k, v, m: torch.softmax(q @ k, -1) @ v,
            r"case 1 of 4 .*raised RuntimeError",
        ),
        Bug(
            "softmax over the queries",
            lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(~m[:, None], -1e9), 1) @ v,
            r"case 1 of 4 .*\nHint: .*normalise over the keys",
        ),
        Bug("no softmax", lambda q, k, v, m: (q @ k.mT) @ v, r"case 1 of 4 .*largest error"),
        Bug(
            "padding mask ignored",
            lambda q, k, v, m: torch.softmax(q @ k.mT, -1) @ v,
            r"case 1 of 4 .*\nHint: the padded keys still get weight",
        ),
        Bug(
            "padding mask inverted",
            lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(m[:, None], -1e9), -1) @ v,
            r"case 1 of 4 .*\nHint: key_mask is True for the keys that exist",
        ),
        Bug(
            "mask broadcast over the queries (1, B, n)",
            lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(~m[None], -1e9), -1) @ v,
            r"case 2 of 4 \(B=3 .*\nHint: the mask belongs to the keys",
        ),
        Bug(
            "weights zeroed after the softmax",
            lambda q, k, v, m: (torch.softmax(q @ k.mT, -1) * m[:, None]) @ v,
            r"case 1 of 4 .*\nHint: zeroing the padded keys' weights",
        ),
        Bug(
            "padded scores filled with 0",
            lambda q, k, v, m: torch.softmax((q @ k.mT).masked_fill(~m[:, None], 0), -1) @ v,
            r"case 1 of 4 .*\nHint: a score of 0 is not a weight of 0",
        ),
        Bug(
            "scores divided by sqrt(d)",
            lambda q, k, v, m: torch.softmax(
                (q @ k.mT / q.shape[-1] ** 0.5).masked_fill(~m[:, None], -1e9), -1
            )
            @ v,
            r"case 1 of 4 .*\nHint: the score is the plain dot product",
        ),
    ],
    "check_laplace_regression": [
        Bug(
            "Gaussian kernel instead of Laplace",
            lambda q, x, y, h: torch.softmax(-((q[:, None] - x) ** 2) / h, -1) @ y,
            r"case 1 of 4 .*\nHint: .*uses \|u\|",
        ),
        Bug(
            "2 sigma^2 bandwidth carried over",
            lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() / (2 * h**2), -1) @ y,
            r"case 1 of 4 .*largest error",
        ),
        Bug(
            "exp / sum underflows to 0/0",
            t01.naive_laplace,
            r"case 4 of 4 .*NaN or inf.*\nHint: .*softmax",
        ),
        Bug(
            "distance multiplied by the bandwidth",
            lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() * h, -1) @ y,
            r"case 1 of 4 .*\nHint: divide \|u\| by the bandwidth sigma itself",
        ),
        Bug(
            "distance divided by 2 sigma",
            lambda q, x, y, h: torch.softmax(-(q[:, None] - x).abs() / (2 * h), -1) @ y,
            r"case 1 of 4 .*\nHint: divide \|u\| by the bandwidth sigma itself",
        ),
    ],
    "check_apply_merges": [
        Bug(
            "merges applied in text order",
            t02.merges_in_text_order,
            r"case 4 of 7 .*\nHint: apply the merges in the order they were learned",
        ),
        Bug(
            "pair order ignored",
            t02.merges_both_orders,
            r"case 2 of 7 .*\nHint: a merge joins its left token",
        ),
        Bug(
            "overlapping matches",
            t02.merges_right_to_left,
            r"case 5 of 7 .*\nHint: after merging a pair",
        ),
        Bug("new ids from 0", t02.merges_ids_from_zero, r"case 1 of 7 .*\nHint: merge r replaces"),
        Bug("input list edited in place", t02.merges_in_place, r"changed its input list in place"),
    ],
    "check_longest_match": [
        Bug(
            "shortest match first",
            t02.shortest_match,
            r"case 2 of 6 .*\nHint: at each position try the longest",
        ),
        Bug(
            "matching from the end",
            t02.longest_match_from_the_end,
            r"case 3 of 6 .*\nHint: match from the start",
        ),
        Bug(
            "a string, not a list",
            t02.longest_match_as_string,
            r"case 1 of 6 .*expected a list of str",
        ),
        Bug(
            "longest piece anywhere first (MaxMatch by length)",
            t02.longest_piece_anywhere,
            r"case 3 of 6 .*\nHint: match from the start",
        ),
        Bug(
            "pieces capped at 6 characters",
            t02.longest_match_capped,
            r"case 4 of 6 .*\nHint: a piece may be as long as the whole word",
        ),
        Bug(
            "regex alternation in set order (unsorted)",
            t02.unsorted_regex_longest_match,
            r"case 2 of 6 .*\nHint: at each position try the longest",
        ),
    ],
    "check_tied_logits": [
        Bug("missing transpose", lambda h, w: h @ w, r"case 1 of 3 .*raised RuntimeError"),
        Bug(
            "softmax applied",
            lambda h, w: torch.softmax(h @ w.T, -1),
            r"case 1 of 3 .*\nHint: .*no softmax",
        ),
        Bug(
            "scaled by sqrt(d)",
            lambda h, w: h @ w.T / h.shape[-1] ** 0.5,
            r"case 1 of 3 .*\nHint: .*no scaling",
        ),
    ],
    "check_scaled_dot_product_attention": [
        Bug(
            "missing scale",
            t03.no_scale,
            r"case 1 of 6 .*Hint: your output is attention WITHOUT the scale",
        ),
        Bug("scale 1/d_k", t03.by_d_k, r"case 1 of 6 .*Hint: you divided by d_k"),
        Bug(
            "softmax over the queries",
            t03.wrong_axis,
            r"case 1 of 6 .*Hint: your softmax normalises over the queries",
        ),
        Bug("scale by sqrt(d_v)", t03.by_d_v, r"case 1 of 6 .*Hint: you divided by sqrt\(d_v\)"),
        Bug("mask inverted", t03.flipped_mask, r"case 4 of 6 .*Hint: your mask has the wrong sign"),
        Bug(
            "mask applied after the softmax",
            t03.mask_after_softmax,
            r"case 4 of 6 .*Hint: you zeroed the masked weights AFTER the softmax",
        ),
        Bug(
            "mask ignored",
            t03.ignores_mask,
            r"case 4 of 6 .*\nHint: fill the scores where the mask is False",
        ),
        Bug("k.T in a batch", t03.k_dot_t, r"case 2 of 6 .*Hint: use k.transpose\(-2, -1\)"),
        Bug(
            "naive softmax, overflows",
            t03.naive_softmax,
            r"case 3 of 6 .*NaN or inf.*\nHint: exp\(\) of a score above about 88 overflows",
        ),
        Bug("missing transpose", t03.no_transpose, r"case 1 of 6 .*raised RuntimeError"),
    ],
    "check_self_attention_layer": [
        Bug(
            "no output projection",
            lambda x, w_q, w_k, w_v, w_o: t03.good_sdpa(x @ w_q, x @ w_k, x @ w_v),
            r"case 1 of 3 .*\nHint: .*multiply by w_o",
        ),
        Bug(
            "scale by sqrt(d_model)",
            lambda x, w_q, w_k, w_v, w_o: (
                t03.no_scale(x @ w_q / math.sqrt(x.shape[-1]), x @ w_k, x @ w_v) @ w_o
            ),
            r"case 1 of 3 .*Hint: you scaled by sqrt\(d_model\)",
        ),
        Bug(
            "missing scale",
            lambda x, w_q, w_k, w_v, w_o: t03.no_scale(x @ w_q, x @ w_k, x @ w_v) @ w_o,
            r"case 1 of 3 .*Hint: your output is attention WITHOUT the scale",
        ),
        Bug(
            "transposed weights",
            lambda x, w_q, w_k, w_v, w_o: t03.good_sdpa(x @ w_q.T, x @ w_k.T, x @ w_v.T) @ w_o.T,
            r"case 1 of 3 .*raised RuntimeError",
        ),
    ],
    "check_attention_entropy": [
        Bug("log base 2", _entropy_log2, r"case 1 of 3 .*Hint: you used log base 2"),
        Bug(
            "sign flipped",
            lambda w: (w * w.log()).sum(-1),
            r"case 1 of 3 .*Hint: your entropy is negative",
        ),
        Bug(
            "0 log 0 = NaN",
            lambda w: -(w * w.log()).sum(-1),
            r"case 3 of 3 .*NaN.*\nHint: 0 \* log\(0\) is NaN",
        ),
        Bug(
            "summed over the queries",
            lambda w: -(w * w.log()).sum(-2),
            r"case 1 of 3 .*expected output shape",
        ),
    ],
    "check_multi_head_loop": [
        Bug(
            "scale 1/sqrt(d_model)",
            t04.loop_scale_d_model,
            r"case 1 of 3 .*Hint: you scaled the scores by 1/sqrt\(d_model\)",
        ),
        Bug(
            "every h-th column for a head",
            t04.loop_strided_columns,
            r"case 1 of 3 .*Hint: your head i took every num_heads-th column",
        ),
        Bug(
            "no output projection",
            t04.loop_no_out_proj,
            r"case 1 of 3 .*Hint: your output is the concatenation of the heads",
        ),
        Bug(
            "biases left out",
            t04.loop_no_biases,
            r"case 1 of 3 .*Hint: your output is the layer without the biases",
        ),
        Bug(
            "b_o added once per head",
            t04.loop_b_o_per_head,
            r"case 1 of 3 .*Hint: your output adds b_o num_heads times",
        ),
        Bug(
            "softmax over the queries",
            t04.loop_softmax_over_queries,
            r"case 1 of 3 .*values differ",
        ),
        Bug(
            "heads concatenated along the tokens",
            t04.loop_cat_over_tokens,
            r"case 1 of 3 .*raised RuntimeError",
        ),
        Bug(
            "rows of W (nn.Linear's layout)",
            t04.loop_rows_of_weights,
            r"case 1 of 3 .*raised RuntimeError",
        ),
    ],
    "check_unpack_in_proj": [
        Bug(
            "blocks used as stored (no transpose)",
            t04.unpack_as_stored,
            r"case 1 of 3 .*params\['W_q'\].*Hint: params\['W_q'\] is the q block of in_proj_weight as PyTorch stores it",
        ),
        Bug(
            "out_proj.weight not transposed",
            t04.unpack_out_proj_as_stored,
            r"case 1 of 3 .*params\['W_o'\].*Hint: params\['W_o'\] is out_proj.weight as PyTorch stores it",
        ),
        Bug(
            "thirds read as k, q, v",
            t04.unpack_k_q_v,
            r"case 1 of 3 .*Hint: params\['W_q'\] holds the block of W_k",
        ),
        Bug(
            "every third row (unflatten to (d, 3))",
            t04.unpack_rows_interleaved,
            r"case 1 of 3 .*Hint: params\['W_q'\] takes every third row",
        ),
        Bug(
            "zero biases",
            t04.unpack_zero_biases,
            r"case 1 of 3 .*Hint: params\['b_q'\] is all zeros",
        ),
        Bug(
            "cut along the second axis",
            t04.unpack_cut_second_axis,
            r"case 1 of 3 .*expected shape \(12, 12\), got \(36, 4\)\nHint: you cut in_proj_weight",
        ),
        Bug(
            "the whole in_proj_bias",
            t04.unpack_whole_bias,
            r"case 1 of 3 .*Hint: params\['b_q'\] is the whole in_proj_bias",
        ),
        Bug("biases missing", t04.unpack_weights_only, r"case 1 of 3 .*your dict has no key 'b_q'"),
        Bug("a tuple, not a dict", t04.unpack_a_tuple, r"case 1 of 3 .*expected a dict"),
    ],
    "check_grouped_query_attention": [
        Bug(
            "tiled heads (.repeat)",
            t04.gqa_tiled,
            r"case 1 of 4 .*Hint: your query head i uses key/value head i mod num_kv_heads",
        ),
        Bug(
            "query heads grouped the wrong way",
            t04.gqa_grouped_wrong_way,
            r"case 1 of 4 .*Hint: your query head i uses key/value head i mod num_kv_heads",
        ),
        Bug(
            "scale 1/sqrt(g * d_head)",
            t04.gqa_scale_kv_width,
            r"case 1 of 4 .*Hint: you scaled the scores by 1/sqrt\(num_kv_heads \* d_head\)",
        ),
        Bug(
            "scale 1/sqrt(d_model)",
            t04.gqa_scale_d_model,
            r"case 1 of 4 .*Hint: you scaled the scores by 1/sqrt\(d_model\)",
        ),
        Bug(
            "repeated along the tokens",
            t04.gqa_repeat_along_tokens,
            r"case 1 of 4 .*raised RuntimeError",
        ),
        Bug("values not shared", t04.gqa_values_not_shared, r"case 1 of 4 .*raised RuntimeError"),
        Bug(
            "d_head from W_k's width",
            t04.gqa_d_head_from_w_k,
            r"case 1 of 4 .*raised RuntimeError",
        ),
    ],
    "check_causal_mask": [
        Bug(
            "diagonal off by one (next token visible)",
            t05.next_token_visible,
            r"case 1 of 3 .*Hint: you allow the next token too",
        ),
        Bug(
            "diagonal hidden", t05.no_diagonal, r"case 1 of 3 .*Hint: your mask hides the diagonal"
        ),
        Bug(
            "upper triangle (the chapter's bug)",
            t05.transposed,
            r"case 1 of 3 .*Hint: your mask is the upper triangle",
        ),
        Bug(
            "PyTorch's sign (True = ignore)",
            t05.pytorch_sign,
            r"case 1 of 3 .*Hint: your mask has PyTorch's nn.MultiheadAttention sign",
        ),
        Bug("float 0/1 mask", t05.float_causal, r"case 1 of 3 .*expected a bool tensor"),
        Bug(
            "additive 0/-inf bias instead of a mask",
            t05.additive_causal,
            r"case 1 of 3 .*expected a bool tensor.*\nHint: your mask is an additive bias",
        ),
        Bug(
            "size fixed instead of n",
            t05.fixed_size_causal,
            r"case 2 of 3 .*\nHint: your mask is 4 x 4 for n = 1",
        ),
    ],
    "check_padding_mask": [
        Bug(
            "<= instead of < (first pad visible)",
            t05.shows_first_pad,
            r"case 1 of 3 .*Hint: your mask lets the first padding position through",
        ),
        Bug(
            "True at the padding",
            t05.flipped_padding,
            r"case 1 of 3 .*Hint: your mask is True at the padding",
        ),
        Bug(
            "(B, T) without broadcast dims",
            t05.flat_padding,
            r"case 1 of 3 .*expected shape \(3, 1, 1, 5\), got \(3, 5\)",
        ),
        Bug("left padding", t05.left_padding, r"case 1 of 3 .*Hint: your mask is for LEFT padding"),
        Bug("float mask", t05.float_padding, r"expected a bool tensor"),
        Bug(
            "lengths.max() instead of max_len",
            t05.ignores_max_len,
            r"case 2 of 3 .*\nHint: your mask has 4 positions, not max_len = 7",
        ),
        Bug(
            "positions on the query axis",
            t05.padding_on_query_axis,
            r"case 1 of 3 .*\nHint: your positions run along the query axis",
        ),
    ],
    "check_combined_mask": [
        Bug(
            "OR instead of AND",
            t05.combined_with_or,
            r"case 1 of 3 .*Hint: you combined the masks with OR",
        ),
        Bug(
            "padding on the queries",
            t05.padding_on_queries,
            r"case 1 of 3 .*Hint: your padding hides the padded QUERIES",
        ),
        Bug(
            "no head dimension",
            t05.no_head_dim,
            r"case 1 of 3 .*Hint: your mask has shape \(B, T, T\)",
        ),
        Bug(
            "causal part missing",
            t05.forgot_causal,
            r"case 1 of 3 .*Hint: your mask has no causal part",
        ),
        Bug(
            "causal diagonal off by one",
            t05.combined_next_token,
            r"case 1 of 3 .*Hint: your causal part lets each query see the next token",
        ),
        Bug(
            "causal diagonal hidden (tril(-1))",
            t05.combined_no_diagonal,
            r"case 1 of 3 .*Hint: your causal part hides the diagonal",
        ),
        Bug(
            "upper triangle",
            t05.combined_upper,
            r"case 1 of 3 .*Hint: your causal part is the upper triangle",
        ),
        Bug(
            "<= in the padding part",
            t05.combined_first_pad,
            r"case 1 of 3 .*Hint: your padding part lets the first padding position through",
        ),
        Bug(
            "left padding",
            t05.combined_left_padding,
            r"case 1 of 3 .*Hint: your padding part is for LEFT padding",
        ),
    ],
    "check_rope_rotation": [
        Bug(
            "rotate-half pairing",
            t06.rotate_half_rope,
            r"case 1 of 3 .*Hint: you paired channel i with channel i \+ Dh/2",
        ),
        Bug(
            "clockwise rotation",
            t06.clockwise_rope,
            r"case 1 of 3 .*Hint: your rotation goes the wrong way",
        ),
        Bug(
            "positions 0..T-1 instead of the given ones",
            t06.arange_rope,
            r"case 2 of 3 .*Hint: you used positions 0 .. T-1",
        ),
        Bug(
            "wrong frequency exponent (i / Dh)",
            _rope_exponent_i,
            r"case 1 of 3 .*Hint: your exponent is i / Dh",
        ),        Bug(
            "neighbour pairs, output in halves",
            t06.halves_out_rope,
            r"case 1 of 3 .*Hint: your pairs are right, \(x\[2i\], x\[2i\+1\]\), but the output is in halves",
        ),
    ],
    "check_sinusoidal_positions": [
        Bug(
            "float32 angles, cast to float64 at the end",
            t06.rows_float32_angles,
            r"case 4 of 4 .*Hint: the error grows with the position",
        ),
        Bug(
            "float32 result",
            t06.rows_float32_out,
            r"case 1 of 4 .*expected dtype torch.float64, got torch.float32",
        ),
        Bug(
            "sines then cosines (halves)",
            t06.rows_halves,
            r"case 1 of 4 .*Hint: .*equivalent up to a permutation of channels",
        ),
        Bug(
            "exponent 4i/d (2i doubled)",
            t06.rows_exponent_4i,
            r"case 1 of 4 .*Hint: your exponent is 4i / d_model",
        ),
        Bug(
            "position p + 1",
            t06.rows_plus_one,
            r"case 1 of 4 .*Hint: your row for position p equals the reference row for p \+ 1",
        ),
        Bug(
            "positions 0..n-1 instead of the given ones",
            t06.rows_arange,
            r"case 2 of 4 .*Hint: you used positions 0 .. n-1",
        ),
        Bug(
            "base ignored (10000)",
            t06.rows_fixed_base,
            r"case 3 of 4 .*Hint: you used 10000 whatever the base",
        ),
    ],
    "check_alibi_positions": [
        Bug(
            "alibi_bias(H, Tq, Tk): positions ignored",
            t06.alibi_at_arange,
            r"case 2 of 4 .*Hint: you ignored the positions given",
        ),
        Bug(
            "Bloom's + m * j",
            t06.alibi_at_bloom,
            r"case 1 of 4 .*Hint: your bias is \+m_n \* j, Bloom's form",
        ),
        Bug(
            "m * i - m * j in float32",
            t06.alibi_at_float32_products,
            r"case 4 of 4 .*Hint: only the distance matters",
        ),
        Bug(
            "signed distance",
            t06.alibi_at_signed,
            r"case 1 of 4 .*Hint: .*without the absolute value",
        ),
        Bug(
            "positions sorted",
            t06.alibi_at_sorted_keys,
            r"case 3 of 4 .*Hint: the order of the rows and columns",
        ),
    ],
    "check_swiglu_width": [
        Bug("a float", t07.width_float, r"case 1 of 4 .*Hint: a width counts hidden units"),
        Bug("ratio inverted (3/2)", t07.width_inverted, r"case 1 of 4 .*Hint: you inverted the ratio"),
        Bug("the ReLU width", t07.width_unchanged, r"case 1 of 4 .*Hint: at the ReLU FFN's own width"),
        Bug("8/3 d_model", t07.width_shazeer, r"case 1 of 4 .*Hint: 8/3 \* d_model is the matched width only"),
        Bug("rounded where none matches", t07.width_truncated, r"case 4 of 4 .*Hint: no integer width matches"),
    ],
    "check_swiglu_ffn": [
        Bug("SiLU on the up projection", t07.swiglu_swapped, r"case 1 of 3 .*Hint: the SiLU goes on the gate"),
        Bug("sigmoid gate (GLU)", t07.swiglu_sigmoid, r"case 1 of 3 .*Hint: this gate is a sigmoid"),
        Bug("SiLU after the product", t07.swiglu_after_product, r"case 1 of 3 .*Hint: the SiLU acts on the gate alone"),
        Bug("no up projection", t07.swiglu_no_up, r"case 1 of 3 .*Hint: your output ignores w_up"),
        Bug("SiLU as e^z / (1 + e^z)", t07.swiglu_exp_overflow, r"case 3 of 3 .*NaN or inf.*Hint: the gate's pre-activations"),
    ],
    "check_rms_norm_by_hand": [
        Bug("LayerNorm's mean subtraction", t07.rms_centred, r"case 1 of 3 .*Hint: you subtracted the mean"),
        Bug("eps outside the root", t07.rms_eps_outside, r"case 2 of 3 .*Hint: eps goes inside the square root"),
        Bug("no eps", t07.rms_no_eps, r"case 2 of 3 .*Hint: you left out eps"),
        Bug("the L2 norm", t07.rms_l2, r"case 1 of 3 .*Hint: you divided by the L2 norm"),
        Bug("one mean square for the tensor", t07.rms_global, r"case 1 of 3 .*Hint: you took one mean square over the whole"),
    ],
    "check_parallel_block": [
        Bug("sequential Pre-LN", t07.parallel_sequential, r"case 1 of 3 .*Hint: this is the sequential Pre-LN block"),
        Bug(
            "residual from the normalised input",
            t07.parallel_normed_residual,
            r"case 1 of 3 .*Hint: your residual adds the normalised input",
        ),
        Bug("attn(x)[0]", t07.parallel_tuple, r"case 1 of 3 .*Hint: attn here is a plain function"),
        Bug("x added twice", t07.parallel_two_residuals, r"case 1 of 3 .*Hint: you added x twice"),
        Bug("norm after the sum", t07.parallel_post, r"case 1 of 3 .*Hint: you normalised after the sum"),
    ],
    "check_shift_right": [
        Bug(
            "labels unchanged",
            t08.unchanged,
            r"case 1 of 3 .*Hint: you return the labels unchanged",
        ),
        Bug("shifted left", t08.shifted_left, r"case 1 of 3 .*Hint: you shifted LEFT"),
        Bug("BOS at the end", t08.bos_at_end, r"case 1 of 3 .*Hint: you appended BOS at the END"),
        Bug("last label kept", t08.last_kept, r"case 1 of 3 .*Hint: you kept the last label"),
        Bug(
            "shifted along the batch",
            t08.batch_dim,
            r"case 1 of 3 .*Hint: you shifted along the batch dimension",
        ),
    ],
    "check_greedy_decode": [
        Bug(
            "only the last token fed",
            t08.last_token_only,
            r"case 1 of 3 .*Hint: you pass only the last token",
        ),
        Bug("no stop at EOS", t08.no_stop, r"case 1 of 3 .*Hint: you keep going after EOS"),
        Bug(
            "max_len off by one",
            t08.one_too_many,
            r"case 2 of 3 .*Hint: max_len counts every token including BOS",
        ),
        Bug(
            "BOS left out",
            t08.without_bos,
            r"case 1 of 3 .*Hint: return the sequence with BOS first",
        ),
        Bug("argmin", _greedy_argmin, r"case 1 of 3 .*Hint: greedy takes the HIGHEST score"),
    ],
    "check_label_smoothing_loss": [
        Bug(
            "epsilon over V - 1 classes",
            t08.over_wrong_classes,
            r"case 1 of 3 .*Hint: you spread epsilon over the n_vocab - 1 WRONG",
        ),
        Bug("epsilon ignored", t08.no_smoothing, r"case 1 of 3 .*Hint: your loss ignores epsilon"),
        Bug("sum instead of mean", t08.summed, r"case 1 of 3 .*Hint: you return the sum over rows"),
        Bug(
            "log(softmax) underflows", t08.log_of_softmax, r"case 3 of 3 .*NaN or inf.*log_softmax"
        ),
    ],
    "check_mlm_masking": [
        Bug(
            "every chosen token becomes [MASK]",
            partial(t09.masking, rates=(0.15, 1.0, 1.0)),
            r"only 80% become \[MASK\]",
        ),
        Bug(
            "labels everywhere (no -100)", partial(t09.masking, labels_everywhere=True), r"no -100"
        ),
        Bug("special tokens chosen", partial(t09.masking, choose_specials=True), r"special token"),
        Bug(
            "12% chosen instead of 15%",
            partial(t09.masking, rates=(0.12, 1.0, 1.0)),
            r"expected 15%",
        ),
        Bug("labels from the corrupted inputs", _mlm_labels_from_inputs, r"ORIGINAL ids"),
        Bug(
            "specials assumed to be the first ids",
            partial(t09.masking, specials_first=True),
            r"\[MASK\]=5, as in the chapter.*special id.*LAST",
        ),
        Bug(
            "[MASK] drawn as a random replacement",
            partial(t09.masking, mask_as_random=True),
            r"random replacement can be \[MASK\]",
        ),
        Bug("generator ignored", partial(t09.masking, no_generator=True), r"pass generator="),
        Bug(
            "labels only at [MASK]",
            partial(t09.masking, labels_at_mask_only=True),
            r"kept tokens are chosen tokens too",
        ),
        Bug("labels inverted", partial(t09.masking, inverted_labels=True), r"labels are inverted"),
    ],
    "check_masked_mean_pool": [
        Bug("mean over padding too", lambda h, m: h.mean(1), r"case 1 of 3 .*all T positions"),
        Bug(
            "masked sum, not mean",
            lambda h, m: (h * m.float()[..., None]).sum(1),
            r"case 1 of 3 .*masked SUM",
        ),
        Bug(
            "masked sum over T",
            lambda h, m: (h * m.float()[..., None]).sum(1) / h.shape[1],
            r"case 1 of 3 .*divided by T",
        ),
        Bug("0/0 on a padded row", t09.pool_nan, r"case 3 of 3 .*NaN.*clamp"),
    ],
    "check_distillation_loss": [
        Bug("no T^2 factor", _distill_no_t2, r"case 1 of 3 .*tau\^2"),
        Bug("KL reversed", _distill_reversed, r"case 1 of 3 .*reversed"),
        Bug("teacher not softened", _distill_hard_teacher, r"case 1 of 3 .*soften the teacher"),
        Bug(
            "KL averaged over elements",
            lambda s, t, y, T, a: (
                a
                * T**2
                * torch.nn.functional.kl_div(
                    torch.log_softmax(s / T, -1), torch.softmax(t / T, -1), reduction="sum"
                )
                / s.numel()  # reduction="mean", by hand
                + (1 - a) * torch.nn.functional.cross_entropy(s, y)
            ),
            r"case 1 of 3 .*batchmean",
        ),
        Bug(
            "soft cross-entropy instead of KL",
            lambda s, t, y, T, a: (
                a * T**2 * torch.nn.functional.cross_entropy(s / T, torch.softmax(t / T, -1))
                + (1 - a) * torch.nn.functional.cross_entropy(s, y)
            ),
            r"case 1 of 3 .*soft cross-entropy",
        ),
        Bug(
            "hard loss only",
            lambda s, t, y, T, a: torch.nn.functional.cross_entropy(s, y),
            r"case 1 of 3 .*differ",
        ),
        Bug(
            "alpha swapped",
            lambda s, t, y, T, a: t09.distill(s, t, y, T, 1 - a),
            r"case 2 of 3 .*alpha and 1 - alpha are swapped",
        ),
        Bug(
            "hard loss on softened logits",
            lambda s, t, y, T, a: (
                a * T**2 * _kl(s, t, T) + (1 - a) * torch.nn.functional.cross_entropy(s / T, y)
            ),
            r"case 1 of 3 .*softened logits",
        ),
        Bug(
            "kl_div without log_target",
            lambda s, t, y, T, a: (
                a
                * T**2
                * torch.nn.functional.kl_div(
                    torch.log_softmax(s / T, -1), torch.log_softmax(t / T, -1), reduction="batchmean"
                )
                + (1 - a) * torch.nn.functional.cross_entropy(s, y)
            ),
            r"case 1 of 3 .*NaN.*log_target=True",
        ),
        Bug(
            "tau instead of tau^2",
            lambda s, t, y, T, a: (
                a * T * _kl(s, t, T) + (1 - a) * torch.nn.functional.cross_entropy(s, y)
            ),
            r"case 1 of 3 .*by tau, not tau\^2",
        ),
        Bug(
            "KL summed over rows",
            lambda s, t, y, T, a: (
                a * T**2 * _kl(s, t, T) * s.shape[0]
                + (1 - a) * torch.nn.functional.cross_entropy(s, y)
            ),
            r"case 1 of 3 .*summed the KL divergence over the N rows",
        ),
        Bug(
            "tau^2 on the whole loss",
            lambda s, t, y, T, a: (
                T**2 * (a * _kl(s, t, T) + (1 - a) * torch.nn.functional.cross_entropy(s, y))
            ),
            r"case 1 of 3 .*SOFT term only",
        ),
    ],
    "check_top_k_probs": [
        Bug("not renormalised", t10.top_k_unnormalised, r"case 1 of 5 .*must sum to 1"),
        Bug("k + 1 tokens", t10.top_k_off_by_one, r"case 1 of 5 .*keeps k \+ 1 tokens"),
        Bug("the k smallest", t10._smallest, r"case 1 of 5 .*keeps the k smallest"),
        Bug("filtered logits returned", t10.top_k_logits, r"case 1 of 5 .*Hint: return probabilities"),
        Bug("exp overflows", t10.top_k_naive_exp, r"case 5 of 5 .*NaN.*\nHint: exp\(1000\) overflows"),
    ],
    "check_min_p_probs": [
        Bug("strict >", t10.min_p_strict, r"case 3 of 5 .*Hint: the most likely token is always kept"),
        Bug("absolute threshold", t10.min_p_absolute, r"case 1 of 5 .*Hint: the threshold is relative"),
        Bug("threshold on logits", t10.min_p_on_logits, r"Hint: the threshold is on probabilities"),
        Bug("log threshold sign", t10.min_p_sign, r"case 1 of 5 .*Hint: log\(p_min\) is negative"),
        Bug("not renormalised", t10.min_p_unnormalised, r"case 1 of 5 .*Hint: renormalise"),
        Bug("filtered logits returned", t10.min_p_logits, r"case 1 of 5 .*Hint: return probabilities"),
        Bug("exp overflows", t10.min_p_naive_exp, r"case 5 of 5 .*NaN.*\nHint: exp\(1000\) overflows"),
    ],
    "check_causal_lm_loss": [
        Bug("no shift", t10.no_shift, r"case 1 of 4 .*no shift"),
        Bug("shifted the wrong way", t10.wrong_way, r"case 1 of 4 .*shifted the wrong way"),
        Bug("sum instead of mean", t10.summed, r"case 1 of 4 .*not the sum"),
        Bug("divided by B·T", t10.loss_over_b_t, r"case 1 of 4 .*Hint: divide by the number of scored positions"),
        Bug("nll_loss on probabilities", t10.loss_nll_of_probs, r"case 1 of 4 .*Hint: F.nll_loss expects log-probabilities"),
        Bug("label smoothing", t10.loss_smoothed, r"case 1 of 4 .*Hint: no label smoothing"),
        Bug("softmax(...).log()", t10.loss_softmax_log, r"case 4 of 4 .*NaN or inf.*\nHint: exp\(1000\) overflows"),
        Bug(
            "unknown mistake",
            t10.mean_over_all_positions,
            r"case 1 of 4 .*Hint: which token should the logits at position t be scored against",
        ),
    ],
    "check_unpatchify": [
        Bug("plain reshape", t11.unpatchify_plain_reshape, r"case 1 of 5 .*Hint: a plain reshape"),
        Bug("patchify's permutation again", t11.unpatchify_same_permutation, r"case 1 of 5 .*patches land transposed"),
        Bug("column-major tokens", t11.unpatchify_column_major, r"case 1 of 5 .*patches land transposed"),
        Bug("channels last", t11.unpatchify_channels_last, r"case 2 of 5 .*channels-last"),
        Bug("pixels placed by column", t11.unpatchify_pixels_by_column, r"case 1 of 5 .*placed the pixels"),
        Bug("H/p used for both sides", t11.unpatchify_square_grid, r"case 3 of 5 .*H/p rows and W/p columns"),
        Bug("F.fold without stride", t11.unpatchify_fold_no_stride, r"case 1 of 5 .*F.fold's stride is 1"),
        Bug("F.fold without the transpose", t11.unpatchify_fold_untransposed, r"case 1 of 5 .*one patch per COLUMN"),
    ],
    "check_rollout_by_layer": [
        Bug("per-head rollout, then the mean", t11.by_layer_per_head, r"case 1 of 4 .*every head on its own"),
        Bug("sum over heads", t11.by_layer_sum_heads, r"case 1 of 4 .*you summed over the heads"),
        Bug("identity skipped on layer 1", t11.by_layer_first_raw, r"case 1 of 4 .*first layer has no residual"),
        Bug("product in the wrong order", t11.by_layer_reversed, r"case 1 of 4 .*wrong order"),
        Bug("layers not chained", t11.by_layer_unchained, r"case 1 of 4 .*that layer's own row"),
        Bug("no identity", t11.by_layer_no_identity, r"case 1 of 4 .*left out the residual"),
        Bug("column 0 instead of row 0", t11.by_layer_column, r"case 1 of 4 .*you took column 0"),
        Bug("(L, B, T)", t11.by_layer_layers_first, r"case 1 of 4 .*batch comes first"),
    ],
    "check_shard_indices": [
        Bug("contiguous blocks", t13.contiguous_blocks, r"case 1 of 5 .*interleaved indices"),
        Bug("no padding", t13.unpadded, r"case 2 of 5 .*the same number of samples"),
        Bug("padded with the last index", t13.padded_with_last, r"case 2 of 5 .*the START"),
        Bug("drop_last ignored", t13.drop_last_ignored, r"case 3 of 5 .*the tail is dropped"),
        Bug("cut without drop_last", t13.truncated, r"case 1 of 5 .*nothing is cut: pad"),
    ],
    "check_allreduce_mean": [
        Bug("sum, not mean", t13.allreduce_sum, r"case 1 of 3 .*that is the sum"),
        Bug("reduce to rank 0 only", t13.reduce_to_rank0, r"case 1 of 3 .*only rank 0"),
        Bug("mean over the wrong dim", t13.mean_wrong_dim, r"case 1 of 3 .*dimension 0"),
    ],
    "check_ring_allreduce_bytes": [
        Bug("tied weight counted twice", t13.bytes_tied_twice, r"case 2 of 5 .*count it once"),
        Bug("frozen parameters counted", t13.bytes_with_frozen, r"case 3 of 5 .*frozen"),
        Bug("buffers counted", t13.bytes_with_buffers, r"case 5 of 5 .*running mean"),
        Bug("no factor 2", t13.bytes_without_two, r"case 1 of 5 .*reduce-scatter AND"),
        Bug("no (N - 1) / N", t13.bytes_without_fraction, r"case 1 of 5 .*not 2"),
    ],
    "check_online_softmax": [
        Bug(
            "no rescale",
            t12.no_rescale,
            r"case 1 of 5 .*Hint: rescale each block by exp\(m_block - m\)",
        ),
        Bug(
            "factor inverted", t12.flipped, r"case 1 of 5 .*Hint: the factor is exp\(m_block - m\)"
        ),
        Bug("l not rescaled", t12.acc_only, r"case 1 of 5 .*Hint: l needs the same rescale as acc"),
        Bug("second block's max", t12.last_max, r"case \d of 5 .*Hint: m must be the larger"),
        Bug(
            "second block not rescaled",
            t12.first_only,
            r"case \d of 5 .*Hint: rescale the second block too",
        ),
        Bug("normalised acc", t12.normalised, r"case 1 of 5 .*your acc is off"),
        Bug(
            "NaN where both blocks are empty",
            t12.naive_merge,
            r"case 5 of 5 .*Hint: -inf - \(-inf\) is NaN",
        ),
        Bug("one maximum for all rows", t12.max_over_rows, r"case \d of 5 .*your m is off"),
    ],
    "check_kv_cache_append": [
        Bug(
            "torch.cat per step", t12.append_by_cat, r"step 1 of 91 .*although the old one had room"
        ),
        Bug("fixed growth", t12.append_fixed_growth, r"step \d+ of 91 .*grow geometrically"),
        Bug("old keys not copied", t12.append_no_copy, r"step \d+ of 91 .*copy the old positions"),
        Bug("one position late", t12.append_one_late, r"step 1 of 91 .*the new keys are not at"),
        Bug(
            "filled part returned",
            t12.append_returns_view,
            r"step 1 of 91 .*Hint: return the whole buffer",
        ),
        Bug(
            "no dtype=/device= on the new buffer",
            t12.append_default_dtype,
            r"step \d+ of 91 .*Hint: allocate the bigger buffer like the old one",
        ),
        Bug("grows when exactly full", t12.append_grows_when_full, r"step 2 of 91 .*exactly full"),
    ],
    "check_rms_norm": [
        Bug(
            "x squared in float16",
            t14.half_squares,
            r"case 3 of 4 .*the mean square must stay in float32",
        ),
        Bug(
            "mean square cast back to float16",
            t14.mean_square_cast_back,
            r"case 3 of 4 .*the mean square must stay in float32",
        ),
        Bug(
            "float32 result not cast back",
            t14.not_cast_back,
            r"case 3 of 4 .*copy is only for computing",
        ),
        Bug("a fixed .half()", t14.fixed_half, r"case 1 of 4 .*not to a fixed"),
        Bug(
            "LayerNorm's mean subtraction", t14.layer_norm, r"case 1 of 4 .*you subtracted the mean"
        ),
        Bug("eps outside the square root", t14.eps_outside, r"case 2 of 4 .*eps goes INSIDE"),
        Bug("no eps", t14.no_eps, r"case 2 of 4 .*eps matters here"),
        Bug("eps added to the sum", t14.eps_in_sum, r"case 2 of 4 .*added to the MEAN square"),
        Bug("L2 norm instead of RMS", t14.l2, r"case 1 of 4 .*the L2 norm"),
        Bug("gain forgotten", t14.no_gain, r"case 1 of 4 .*what happened to the gain"),
        Bug(
            "variance instead of mean square",
            t14.variance,
            r"case 1 of 4 .*x.var subtracts the mean",
        ),
    ],
    "check_sentinel_spans": [
        Bug("one sentinel per noise token", t14.per_token, r"case 1 of 3 .*a whole SPAN"),
        Bug(
            "the same sentinel for every span", t14.same_sentinel, r"case 1 of 3 .*its OWN sentinel"
        ),
        Bug(
            "targets without sentinels",
            t14.no_sentinels_in_targets,
            r"case 1 of 3 .*AFTER its sentinel",
        ),
        Bug("noise left in the input", t14.noise_kept, r"case 1 of 3 .*must leave the input"),
        Bug(
            "sentinels in reverse order",
            t14.reversed_sentinels,
            r"case 1 of 3 .*the FIRST span gets sentinel_ids",
        ),
        Bug(
            "sentinels counted from the end of the list",
            t14.reversed_sentinel_list,
            r"case 1 of 3 .*the FIRST span gets sentinel_ids",
        ),
        Bug(
            "the last span never written",
            t14.last_span_lost,
            r"case 2 of 3 .*stops before the last span",
        ),
        Bug(
            "each sentinel after its span",
            t14.sentinel_after_span,
            r"case 1 of 3 .*which comes first",
        ),
        Bug("a </s> appended to the target", t14.with_eos, r"case 1 of 3 .*no </s>"),
    ],
    "check_text_infilling": [
        Bug("one mask per token", t14.mask_per_token, r"case 1 of 3 .*one mask per SPAN"),
        Bug("spans deleted, no mask", t14.deleted, r"case 1 of 3 .*put a mask where each span was"),
        Bug("zero-length spans skipped", t14.zero_skipped, r"case 2 of 3 .*length 0 still inserts"),
        Bug(
            "zero-length mask after tokens[start]",
            t14.zero_after,
            r"case 2 of 3 .*inserts its mask BEFORE",
        ),
        Bug(
            "slices assigned left to right",
            t14.left_to_right_slices,
            r"case 1 of 3 .*once an earlier span has become one mask",
        ),
        Bug(
            "zero-length span replaces a token",
            t14.zero_replaces_a_token,
            r"case 2 of 3 .*hides nothing",
        ),
        Bug("the span at T lost", t14.span_at_end_lost, r"case 3 of 3 .*may start at T"),
    ],
    "check_rel_shift": [
        Bug(
            "columns read as distances 0..K-1 (no flip)",
            t15.ascending,
            r"case 1 of 3 .*not distance c",
        ),
        Bug("the memory offset M forgotten", t15.no_memory, r"not i - j"),
        Bug("a shift off by one", t15.off_by_one, r"off by one"),
        Bug("the zero column padded on the right", t15.pad_right, r"the zero column goes on the LEFT"),
        Bug("the last row of the padded buffer dropped", t15.drop_last_row, r"drop its FIRST row"),
    ],
    "check_update_memory": [
        Bug("the oldest positions kept", t15.oldest, r"you kept the oldest positions"),
        Bug("[-mem_len:] with mem_len 0", t15.minus_zero, r"x\[:, -0:\] is the whole tensor"),
        Bug("not detached", t15.attached, r"still attached to the graph"),
        Bug("only the current segment", t15.segment_only, r"you returned only the current segment"),
        Bug("hidden before memory", t15.wrong_order, r"concatenate memory first"),
        Bug("None at mem_len 0", t15.none_at_zero, r"an empty \(B, 0, d\) tensor, not None"),
    ],
}


def table() -> str:
    """The markdown table: chapter, checker, cases, bugs caught (all asserted by the tests)."""
    import contextlib
    import importlib
    import io

    from mtlib import exercises

    lines = [
        "| chapter | checker | cases | typical bugs rejected (asserted) | correct variants accepted |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in sorted(BUGS, key=lambda n: (getattr(exercises, n).__module__, n)):
        checker = getattr(exercises, name)
        chapter = checker.__module__.rsplit(".", 1)[1]  # "ch03"
        solution = getattr(
            importlib.import_module(f"tests.solutions.{chapter}"), name[len("check_") :]
        )
        with contextlib.redirect_stdout(io.StringIO()) as out:
            checker(solution)
        counted = re.search(r"all (\d+) cases", out.getvalue())
        cases = counted.group(1) if counted else "1 (statistical)"
        bugs = "; ".join(b.what for b in BUGS[name])
        lines.append(
            f"| {int(chapter[2:])} | `{name}` | {cases} | {bugs} | {len(VARIANTS.get(name, []))} |"
        )
    return "\n".join(lines)


GUIDE = Path(__file__).resolve().parents[2] / "book" / "instructors.md"
_TABLE = re.compile(r"(<!-- checker table:[^\n]*-->\n)(.*?)(<!-- end of checker table -->)", re.S)


def guide_table() -> str:
    """The table as book/instructors.md shows it now."""
    match = _TABLE.search(GUIDE.read_text())
    if match is None:
        raise ValueError(f"{GUIDE} has no checker table markers")
    return match.group(2).strip()


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:  # refresh the table in the instructor guide
        text = _TABLE.sub(lambda m: m.group(1) + table() + "\n" + m.group(3), GUIDE.read_text())
        GUIDE.write_text(text)
        print(f"wrote the checker table of {GUIDE}")
    else:
        print(table())
