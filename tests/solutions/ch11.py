"""Chapter 11's exercises: patches back into images, the class token's rollout layer by layer."""

import torch


def unpatchify(tokens, patch, height, width):
    b, n, d = tokens.shape  # (B, N, C * p * p)
    rows, cols, c = height // patch, width // patch, d // (patch * patch)
    grid = tokens.reshape(b, rows, cols, c, patch, patch)  # (B, rows, cols, C, p, p)
    grid = grid.permute(0, 3, 1, 4, 2, 5)  # (B, C, rows, p, cols, p): the inverse of patchify's
    return grid.reshape(b, c, height, width)  # (B, C, H, W)


def rollout_by_layer(attentions):
    rollout, rows = None, []
    for weights in attentions:  # first layer first, each (B, H, T, T)
        mixed = weights.mean(dim=1)  # (B, T, T): average the heads of this layer first
        eye = torch.eye(mixed.shape[-1], dtype=mixed.dtype, device=mixed.device)
        layer = 0.5 * mixed + 0.5 * eye  # the residual, in every layer including the first
        rollout = layer if rollout is None else layer @ rollout  # later layers on the left
        rows.append(rollout[:, 0])  # (B, T): the class token's row after this layer
    return torch.stack(rows, dim=1)  # (B, L, T)
