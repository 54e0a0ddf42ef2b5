"""The Vision Transformer (ViT) of Dosovitskiy et al. (2021), built from mtlib's blocks.

An image becomes a sequence: cut it into ``p x p`` patches, flatten each one and project it to
``d_model`` (:class:`PatchEmbedding`), put a learned class token in front, add learned
positions, and run a Pre-LN Transformer encoder (:class:`~mtlib.blocks.EncoderBlock` with
``norm_first=True`` and the exact GELU). The class token's final state, after a last LayerNorm,
goes through a linear head::

    tokens = [cls; patch_embed(image)] + pos_embed      # (B, 1 + N, d_model)
    tokens = norm(blocks(dropout(tokens)))               # (B, 1 + N, d_model)
    logits = head(tokens[:, 0])                          # (B, num_classes)

:meth:`ViT.from_hf` loads a Hugging Face ``ViTModel`` or ``ViTForImageClassification`` through
:func:`mtlib.loading.load_weights` (a table of names; every copy shape-checked), and
:func:`attention_rollout` (Abnar and Zuidema, 2020) follows attention through the layers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, overload

import torch
from torch import Tensor, nn

from mtlib import _checks
from mtlib.blocks import BlockConfig, EncoderBlock
from mtlib.loading import load_weights

__all__ = ["HF_RENAMES", "PatchEmbedding", "ViT", "ViTConfig", "attention_rollout"]


@dataclass
class ViTConfig:
    """Sizes of a ViT. The defaults are ViT-Base/16 on 224 x 224 ImageNet images."""

    image_size: int = 224  # height = width of the input images, in pixels
    patch_size: int = 16  # side p of a square patch; image_size % patch_size == 0
    num_channels: int = 3  # C: 3 for RGB, 1 for grey
    d_model: int = 768  # token width (HF: hidden_size)
    num_heads: int = 12  # attention heads; d_model % num_heads == 0
    d_ff: int = 3072  # feed-forward hidden width (HF: intermediate_size)
    n_layer: int = 12  # encoder blocks
    num_classes: int = 1000  # classes of the head; 0 = no head (ViT(x) returns features)
    dropout: float = 0.0  # on embeddings, attention weights, feed-forward and residuals
    layer_norm_eps: float = 1e-12  # LayerNorm epsilon (HF's ViT default)

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "num_channels", "d_model", "num_heads"):
            _checks.positive_int(getattr(self, name), name)
        for name in ("d_ff", "n_layer"):
            _checks.positive_int(getattr(self, name), name)
        if (
            isinstance(self.num_classes, bool)
            or not isinstance(self.num_classes, int)
            or self.num_classes < 0
        ):
            raise ValueError(f"num_classes must be an int >= 0, got {self.num_classes!r}")
        if self.image_size % self.patch_size != 0:
            raise ValueError(
                f"image_size={self.image_size} must be divisible by patch_size={self.patch_size}"
            )
        # d_model % num_heads, dropout and layer_norm_eps are checked by BlockConfig:
        self.block_config()

    @property
    def num_patches(self) -> int:
        """N, the number of patches (tokens besides the class token)."""
        return (self.image_size // self.patch_size) ** 2

    def block_config(self) -> BlockConfig:
        """The configuration every encoder block shares: Pre-LN, exact GELU."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            activation="gelu",
            norm_first=True,
            layer_norm_eps=self.layer_norm_eps,
        )

    @classmethod
    def base_patch16_224(cls, num_classes: int = 1000) -> ViTConfig:
        """ViT-B/16 (Dosovitskiy et al., Table 1): 12 layers, width 768, 12 heads, MLP 3072.

        About 86.6M parameters with the 1000-class head; 85,798,656 without a head (the same
        count as Hugging Face's ``ViTModel(ViTConfig(), add_pooling_layer=False)``).
        """
        return cls(num_classes=num_classes)


class PatchEmbedding(nn.Module):
    """Cut images into ``p x p`` patches and project each one linearly to ``d_model``.

    A ``Conv2d`` with kernel size and stride ``p`` *is* that linear map applied to every
    non-overlapping patch (its weight, viewed as ``(d_model, C * p * p)``, multiplies the patch
    flattened in ``(C, p, p)`` order). Patches are numbered in row-major order: left to right,
    then top to bottom.

    Args:
        image_size: height = width of the images.
        patch_size: side ``p`` of a patch; must divide ``image_size``.
        num_channels: channels ``C`` of the images.
        d_model: output width.

    Shape:
        forward: (B, C, image_size, image_size) -> (B, N, d_model), N = (image_size / p)^2.
    """

    def __init__(self, image_size: int, patch_size: int, num_channels: int, d_model: int) -> None:
        super().__init__()
        if image_size % patch_size != 0:
            raise ValueError(
                f"image_size={image_size} must be divisible by patch_size={patch_size}"
            )
        self.image_size, self.patch_size, self.num_channels = image_size, patch_size, num_channels
        self.num_patches = (image_size // patch_size) ** 2
        self.proj = nn.Conv2d(num_channels, d_model, kernel_size=patch_size, stride=patch_size)

    def forward(self, pixel_values: Tensor) -> Tensor:
        """Embed every patch: (B, C, S, S) -> (B, N, d_model)."""
        s, c = self.image_size, self.num_channels
        _checks.float_tensor(
            pixel_values, "pixel_values", f"(batch, channels={c}, {s}, {s})", (None, c, s, s)
        )
        x = self.proj(pixel_values)  # (B, d_model, S/p, S/p): one vector per patch
        return x.flatten(2).transpose(1, 2)  # (B, N, d_model), patches in row-major order


#: Hugging Face's ViT names (transformers 5.x, prefix ``vit.`` removed) that differ from ours,
#: as (theirs, ours) pairs of dotted components; the first match wins.
HF_RENAMES: list[tuple[str, str]] = [
    ("embeddings.patch_embeddings.projection", "patch_embed.proj"),
    ("embeddings.cls_token", "cls_token"),
    ("embeddings.position_embeddings", "pos_embed"),
    ("attention.o_proj", "self_attn.out_proj"),
    ("attention", "self_attn"),  # q_proj, k_proj, v_proj keep their names
    ("layernorm_before", "norm1"),
    ("layernorm_after", "norm2"),
    ("mlp.fc1", "ff.linear1"),
    ("mlp.fc2", "ff.linear2"),
    ("layernorm", "norm"),
    ("classifier", "head"),
]

#: transformers 4.x spelled the layer names differently; they are first rewritten to 5.x's.
_HF4_NAMES: list[tuple[str, str]] = [
    (r"^encoder\.layer\.", "layers."),
    (r"\.attention\.attention\.(query|key|value)\.", r".attention.\1."),
    (r"\.attention\.query\.", ".attention.q_proj."),
    (r"\.attention\.key\.", ".attention.k_proj."),
    (r"\.attention\.value\.", ".attention.v_proj."),
    (r"\.attention\.output\.dense\.", ".attention.o_proj."),
    (r"\.intermediate\.dense\.", ".mlp.fc1."),
    (r"\.output\.dense\.", ".mlp.fc2."),
]


def _hf5_name(name: str) -> str:
    for pattern, replacement in _HF4_NAMES:
        name = re.sub(pattern, replacement, name)
    return name


class ViT(nn.Module):
    """The Vision Transformer: patch embedding, class token, learned positions, Pre-LN encoder.

    Args:
        config: a :class:`ViTConfig`.

    Shape:
        forward: (B, C, S, S) -> (B, num_classes) logits; (B, d_model) when ``num_classes=0``.
        forward_features: (B, C, S, S) -> (B, 1 + N, d_model), the final-normed tokens.
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise TypeError(f"config must be a ViTConfig, got {type(config).__name__}")
        c = self.config = config
        self.patch_embed = PatchEmbedding(c.image_size, c.patch_size, c.num_channels, c.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.d_model))  # (1, 1, d_model)
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + c.num_patches, c.d_model))  # (1, 1+N, d)
        self.dropout = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(EncoderBlock(c.block_config()) for _ in range(c.n_layer))
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.head = nn.Linear(c.d_model, c.num_classes) if c.num_classes else nn.Identity()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise as Hugging Face and timm do: truncated normal (std 0.02), zero biases."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def embed(self, pixel_values: Tensor) -> Tensor:
        """The encoder's input: ``[cls; patch_embed(x)] + pos_embed``, (B, 1 + N, d_model)."""
        patches = self.patch_embed(pixel_values)  # (B, N, d_model)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)  # (B, 1, d_model)
        return torch.cat([cls, patches], dim=1) + self.pos_embed  # (B, 1 + N, d_model)

    @overload
    def forward_features(
        self, pixel_values: Tensor, *, return_attentions: Literal[False] = False
    ) -> Tensor: ...

    @overload
    def forward_features(
        self, pixel_values: Tensor, *, return_attentions: Literal[True]
    ) -> tuple[Tensor, list[Tensor]]: ...

    def forward_features(
        self, pixel_values: Tensor, *, return_attentions: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Run the encoder and the final LayerNorm.

        Args:
            pixel_values: images (B, C, S, S).
            return_attentions: also return every layer's attention weights, for maps and
                :func:`attention_rollout`.

        Returns:
            The tokens (B, 1 + N, d_model), class token first; with ``return_attentions``,
            ``(tokens, attentions)`` where ``attentions[l]`` is layer ``l``'s (B, H, 1+N, 1+N).
        """
        x = self.dropout(self.embed(pixel_values))  # (B, 1 + N, d_model)
        attentions: list[Tensor] = []
        for block in self.layers:
            if return_attentions:
                assert isinstance(block, EncoderBlock)  # for mypy: a ModuleList of them
                x, weights = block.forward_with_weights(x)
                attentions.append(weights)  # (B, H, 1 + N, 1 + N)
            else:
                x = block(x)  # (B, 1 + N, d_model)
        x = self.norm(x)
        return (x, attentions) if return_attentions else x

    def forward(self, pixel_values: Tensor) -> Tensor:
        """Classify images: (B, C, S, S) -> logits (B, num_classes), from the class token."""
        return self.head(self.forward_features(pixel_values)[:, 0])  # (B, num_classes)

    @classmethod
    def from_hf(cls, model: nn.Module) -> ViT:
        """Build a ViT with the weights of a Hugging Face ``ViTModel`` / ``ViTForImageClassification``.

        A ``ViTModel`` gives a ViT without head (``num_classes=0``): compare its
        ``last_hidden_state`` with :meth:`forward_features`. Its pooler (a dense layer + tanh
        on the class token, which ``ViTForImageClassification`` does not use) is not loaded,
        nor is the ``mask_token`` of masked-image-modelling. Both the transformers 4.x and 5.x
        parameter names are understood.

        Args:
            model: the Hugging Face model (any device and dtype; the copy is on the same).

        Raises:
            TypeError: ``model`` is not one of the two classes.
            ValueError: a setting mtlib's ViT does not have (activation other than exact GELU,
                no q/k/v biases, non-square images), or a tensor that is missing, unexpected or
                of the wrong shape (named in the message).
        """
        kind = type(model).__name__
        if kind not in ("ViTModel", "ViTForImageClassification"):
            raise TypeError(
                f"model must be a transformers ViTModel or ViTForImageClassification, got {kind}"
            )
        hf: Any = model.config
        if hf.hidden_act != "gelu":
            raise ValueError(
                f"model.config.hidden_act must be 'gelu' (exact), got {hf.hidden_act!r}"
            )
        if not hf.qkv_bias:
            raise ValueError(
                "model.config.qkv_bias must be True: mtlib's attention has q/k/v biases"
            )
        for name in ("image_size", "patch_size"):
            if not isinstance(getattr(hf, name), int):
                raise ValueError(
                    f"model.config.{name} must be an int (square), got {getattr(hf, name)!r}"
                )
        config = ViTConfig(
            image_size=hf.image_size,
            patch_size=hf.patch_size,
            num_channels=hf.num_channels,
            d_model=hf.hidden_size,
            num_heads=hf.num_attention_heads,
            d_ff=hf.intermediate_size,
            n_layer=hf.num_hidden_layers,
            num_classes=hf.num_labels if kind == "ViTForImageClassification" else 0,
            dropout=hf.hidden_dropout_prob,
            layer_norm_eps=hf.layer_norm_eps,
        )
        if hf.attention_probs_dropout_prob != hf.hidden_dropout_prob:
            raise ValueError(
                "model.config.attention_probs_dropout_prob must equal hidden_dropout_prob "
                f"(one dropout in mtlib), got {hf.attention_probs_dropout_prob} and {hf.hidden_dropout_prob}"
            )
        reference = next(model.parameters())
        ours = cls(config).to(device=reference.device, dtype=reference.dtype)
        tensors = {}
        for name, value in model.state_dict().items():
            name = _hf5_name(name.removeprefix("vit."))
            if name.startswith("pooler.") or name == "embeddings.mask_token":
                continue  # not part of ViT's classification path (see above)
            tensors[name] = value
        load_weights(ours, tensors, HF_RENAMES)
        return ours.train(model.training)


def attention_rollout(
    attentions: list[Tensor], *, residual: bool = True, residual_weight: float = 0.5
) -> Tensor:
    """Attention rollout (Abnar and Zuidema, 2020): how much each input token flows to each output.

    Each layer's weights are averaged over heads; with ``residual``, the residual connection
    is modelled as attention to oneself, ``A = (1 - alpha) mean_heads(W) + alpha I`` with
    ``alpha = residual_weight`` (0.5 in the paper), and rows are renormalised.
    The layers are then chained, later layers on the left: ``R = A_L ... A_2 A_1``. Row 0 of
    ``R`` says how much of each input token reaches the class token's final state, by this
    linear account (which ignores the values, the feed-forward layers and the LayerNorms).

    Args:
        attentions: one tensor per layer, first layer first, each (B, H, T, T) or (B, T, T)
            (already averaged), rows summing to 1.
        residual: add the identity for the residual connection (the paper's rollout); False
            multiplies the raw weights (the same as ``residual_weight=0``).
        residual_weight: ``alpha``, the weight of the identity, in [0, 1].

    Returns:
        A ``(B, T, T)`` tensor whose row ``i`` is output token ``i``'s mixture of input tokens;
        rows sum to 1.
    """
    if not isinstance(attentions, (list, tuple)) or not attentions:
        raise ValueError("attentions must be a non-empty list of (B, H, T, T) or (B, T, T) tensors")
    if not 0.0 <= residual_weight <= 1.0:
        raise ValueError(f"residual_weight must be in [0, 1], got {residual_weight!r}")
    alpha = residual_weight if residual else 0.0
    rollout: Tensor | None = None
    for layer, weights in enumerate(attentions):
        if (
            not isinstance(weights, Tensor)
            or weights.dim() not in (3, 4)
            or weights.shape[-1] != weights.shape[-2]
        ):
            raise ValueError(
                f"attentions[{layer}] must be a (B, H, T, T) or (B, T, T) tensor, got {_checks.shape_of(weights)}"
            )
        a = weights.mean(dim=1) if weights.dim() == 4 else weights  # (B, T, T)
        if rollout is not None and a.shape != rollout.shape:
            raise ValueError(
                f"attentions[{layer}] has shape {tuple(a.shape)} after averaging heads, "
                f"expected {tuple(rollout.shape)} like attentions[0]"
            )
        if alpha > 0:
            eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
            a = (1 - alpha) * a + alpha * eye  # (B, T, T)
            a = a / a.sum(dim=-1, keepdim=True)  # rows sum to 1
        rollout = a if rollout is None else a @ rollout  # (B, T, T): A_l ... A_1
    assert rollout is not None
    return rollout
