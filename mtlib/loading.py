"""Loading weights from another implementation: a table of names and a shape check on every copy.

Every ``from_torch`` / ``from_hf`` in mtlib is three steps: take the reference's tensors by name,
say which names differ (a short table of renames, plus the tensors stored transposed), and call
:func:`load_weights`. Nothing is copied by position, and nothing is silently left at its random
initialisation: each copy is shape-checked and the load is strict.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from torch import Tensor, nn

__all__ = ["load_weights", "rename", "split_in_proj"]


def split_in_proj(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Unpack PyTorch's packed attention projections into mtlib's ``q_proj``/``k_proj``/``v_proj``.

    ``nn.MultiheadAttention`` stores W_Q, W_K, W_V as one ``in_proj_weight`` of shape
    ``(3 d_model, d_model)`` (thirds 0, 1, 2), or as ``q_proj_weight``, ... when the key and
    value sizes differ. Other names pass through unchanged.

    Args:
        tensors: The reference's tensors by name, e.g. ``dict(layer.named_parameters())``.

    Returns:
        The same tensors, with ``X.in_proj_weight`` replaced by ``X.q_proj.weight``,
        ``X.k_proj.weight``, ``X.v_proj.weight`` (and likewise for biases).
    """
    out: dict[str, Tensor] = {}
    for name, value in tensors.items():
        prefix, _, last = name.rpartition(".")
        prefix = prefix + "." if prefix else ""
        packed = re.fullmatch(r"in_proj_(weight|bias)", last)
        single = re.fullmatch(r"([qkv])_proj_weight", last)
        if packed:
            for part, chunk in zip("qkv", value.chunk(3, dim=0), strict=True):
                out[f"{prefix}{part}_proj.{packed[1]}"] = chunk  # (d_model, ...) third
        elif single:
            out[f"{prefix}{single[1]}_proj.weight"] = value
        else:
            out[name] = value
    return out


def rename(name: str, renames: Iterable[tuple[str, str]]) -> str:
    """Apply the first matching rename to whole dotted components: ``linear1`` -> ``ff.linear1``."""
    for theirs, ours in renames:
        new = re.sub(rf"(^|\.){re.escape(theirs)}(?=\.|$)", rf"\g<1>{ours}", name, count=1)
        if new != name:
            return new
    return name


def load_weights(
    module: nn.Module,
    tensors: Mapping[str, Tensor],
    renames: Iterable[tuple[str, str]] = (),
    *,
    transpose: Collection[str] = (),
) -> None:
    """Copy the reference's ``tensors`` into ``module``, by name, with a shape check on each.

    Args:
        module: The module to fill (ours), already on the right device and dtype.
        tensors: The reference's tensors by *their* names.
        renames: ``(their_name, our_name)`` pairs of dotted components, applied to every name
            (the first match wins), e.g. ``("multihead_attn", "cross_attn")``. Names that no
            pair matches are the same on both sides.
        transpose: Their names of tensors stored transposed (GPT-2's ``Conv1D`` weights).

    Raises:
        ValueError: On a name we do not have, a shape mismatch, or a parameter of ours that no
            tensor fills.
    """
    renames = list(renames)
    ours = module.state_dict()
    state: dict[str, Tensor] = {}
    for their_name, value in tensors.items():
        name = rename(their_name, renames)
        value = value.t() if their_name in transpose else value
        if name not in ours:
            raise ValueError(
                f"{their_name} (ours: {name}) has no counterpart in {type(module).__name__}"
            )
        if ours[name].shape != value.shape:
            raise ValueError(
                f"shape mismatch copying {their_name} into {name}: theirs {tuple(value.shape)}, ours {tuple(ours[name].shape)}"
            )
        state[name] = value
    missing = sorted(set(ours) - set(state))
    if missing:
        raise ValueError(
            f"weight table incomplete: {type(module).__name__} parameters not written: {missing}"
        )
    module.load_state_dict(state, strict=True)
