"""Self-check functions for the exercises.

Each checker takes *your* function, runs it on several small cases and compares the result
with a reference. When a case fails it raises ``CheckFailed`` (an ``AssertionError``) with a diagnostic that says
which case failed and how (wrong type, wrong shape, NaN, wrong values and where), plus a hint;
it never prints the solution. When every case passes it prints one line saying so.

Example:
    >>> from mtlib import exercises
    >>> def my_softmax(x, temperature=1.0):
    ...     ...  # your code
    >>> exercises.check_softmax(my_softmax)
    check_softmax: all 5 cases passed.

One module per chapter (``ch01.py``, ``ch02.py``, ...); every checker is importable from here.
"""

from mtlib.exercises._core import CheckFailed
from mtlib.exercises.ch01 import check_laplace_regression, check_soft_lookup, check_softmax
from mtlib.exercises.ch02 import check_apply_merges, check_longest_match, check_tied_logits
from mtlib.exercises.ch03 import (
    check_attention_entropy,
    check_scaled_dot_product_attention,
    check_self_attention_layer,
)
from mtlib.exercises.ch04 import (
    check_grouped_query_attention,
    check_multi_head_loop,
    check_unpack_in_proj,
)
from mtlib.exercises.ch05 import check_causal_mask, check_combined_mask, check_padding_mask
from mtlib.exercises.ch06 import (
    check_alibi_positions,
    check_rope_rotation,
    check_sinusoidal_positions,
)
from mtlib.exercises.ch07 import (
    check_parallel_block,
    check_rms_norm_by_hand,
    check_swiglu_ffn,
    check_swiglu_width,
)
from mtlib.exercises.ch08 import check_greedy_decode, check_label_smoothing_loss, check_shift_right
from mtlib.exercises.ch09 import (
    check_distillation_loss,
    check_masked_mean_pool,
    check_mlm_masking,
)
from mtlib.exercises.ch10 import (
    check_causal_lm_loss,
    check_min_p_probs,
    check_top_k_probs,
)
from mtlib.exercises.ch11 import (
    check_rollout_by_layer,
    check_unpatchify,
)
from mtlib.exercises.ch12 import check_kv_cache_append, check_online_softmax
from mtlib.exercises.ch13 import (
    check_allreduce_mean,
    check_ring_allreduce_bytes,
    check_shard_indices,
)
from mtlib.exercises.ch14 import check_rms_norm, check_sentinel_spans, check_text_infilling
from mtlib.exercises.ch15 import check_rel_shift, check_update_memory

__all__ = [
    "CheckFailed",
    "check_laplace_regression",
    "check_soft_lookup",
    "check_softmax",
    "check_apply_merges",
    "check_longest_match",
    "check_tied_logits",
    "check_attention_entropy",
    "check_scaled_dot_product_attention",
    "check_self_attention_layer",
    "check_multi_head_loop",
    "check_unpack_in_proj",
    "check_grouped_query_attention",
    "check_causal_mask",
    "check_combined_mask",
    "check_padding_mask",
    "check_alibi_positions",
    "check_rope_rotation",
    "check_sinusoidal_positions",
    "check_swiglu_width",
    "check_swiglu_ffn",
    "check_rms_norm_by_hand",
    "check_parallel_block",
    "check_greedy_decode",
    "check_label_smoothing_loss",
    "check_shift_right",
    "check_distillation_loss",
    "check_masked_mean_pool",
    "check_mlm_masking",
    "check_causal_lm_loss",
    "check_min_p_probs",
    "check_top_k_probs",
    "check_rollout_by_layer",
    "check_unpatchify",
    "check_kv_cache_append",
    "check_online_softmax",
    "check_allreduce_mean",
    "check_ring_allreduce_bytes",
    "check_shard_indices",
    "check_rms_norm",
    "check_sentinel_spans",
    "check_text_infilling",
    "check_rel_shift",
    "check_update_memory",
]
