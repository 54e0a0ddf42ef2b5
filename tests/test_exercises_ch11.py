"""Chapter 11's self-checks: correct answers pass, the typical wrong ones are named."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises

# ---- exercise 1: unpatchify -------------------------------------------------------------------


def good_unpatchify(tokens, patch, height, width):
    b, n, d = tokens.shape
    c = d // (patch * patch)
    x = tokens.reshape(b, height // patch, width // patch, c, patch, patch)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, c, height, width)


def good_unpatchify_fold(tokens, patch, height, width):  # F.fold with stride = kernel
    return F.fold(tokens.mT, (height, width), kernel_size=patch, stride=patch)


def good_unpatchify_loop(tokens, patch, height, width):  # explicit loops, on the inputs' device
    b, n, d = tokens.shape
    c, cols = d // (patch * patch), width // patch
    out = tokens.new_zeros(b, c, height, width)
    for k in range(n):
        r, col = divmod(k, cols)
        out[:, :, r * patch : (r + 1) * patch, col * patch : (col + 1) * patch] = tokens[
            :, k
        ].reshape(b, c, patch, patch)
    return out


def unpatchify_plain_reshape(tokens, patch, height, width):
    return tokens.reshape(tokens.shape[0], -1, height, width)


def unpatchify_same_permutation(tokens, patch, height, width):
    b, n, d = tokens.shape
    c = d // (patch * patch)
    x = tokens.reshape(b, height // patch, width // patch, c, patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, c, height, width)


def unpatchify_column_major(tokens, patch, height, width):
    b, n, d = tokens.shape
    c = d // (patch * patch)
    x = tokens.reshape(b, width // patch, height // patch, c, patch, patch)
    return x.permute(0, 3, 2, 4, 1, 5).reshape(b, c, height, width)


def unpatchify_channels_last(tokens, patch, height, width):
    b, n, d = tokens.shape
    c = d // (patch * patch)
    x = tokens.reshape(b, height // patch, width // patch, patch, patch, c)
    return x.permute(0, 5, 1, 3, 2, 4).reshape(b, c, height, width)


def unpatchify_pixels_by_column(tokens, patch, height, width):
    b, n, d = tokens.shape
    c = d // (patch * patch)
    x = tokens.reshape(b, height // patch, width // patch, c, patch, patch)
    return x.permute(0, 3, 1, 5, 2, 4).reshape(b, c, height, width)


def unpatchify_square_grid(tokens, patch, height, width):  # height used for both sides
    b, n, d = tokens.shape
    c = d // (patch * patch)
    x = tokens.reshape(b, height // patch, height // patch, c, patch, patch)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, c, height, width)


def unpatchify_fold_no_stride(tokens, patch, height, width):
    return F.fold(tokens.mT, (height, width), kernel_size=patch)


def unpatchify_fold_untransposed(tokens, patch, height, width):
    return F.fold(tokens, (height, width), kernel_size=patch, stride=patch)


def test_correct_unpatchify_pass(capsys):
    for fn in (good_unpatchify, good_unpatchify_fold, good_unpatchify_loop):
        exercises.check_unpatchify(fn)
    assert capsys.readouterr().out.count("check_unpatchify: all 5 cases passed.") == 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (unpatchify_plain_reshape, r"(?s)case 1 of 5 .*known mistake\nHint: a plain reshape"),
        (unpatchify_same_permutation, r"(?s)case 1 of 5 .*Hint: your patches land transposed: either you applied patchify's permutation"),
        (unpatchify_column_major, r"(?s)case 1 of 5 .*Hint: your patches land transposed.*top to bottom first"),
        (unpatchify_channels_last, r"(?s)case 2 of 5 .*Hint: you read each token channels-last"),
        (unpatchify_pixels_by_column, r"(?s)case 1 of 5 .*Hint: inside a patch you placed the pixels"),
        (unpatchify_square_grid, r"(?s)case 3 of 5 .*Hint: the grid has H/p rows and W/p columns"),
        (unpatchify_fold_no_stride, r"(?s)case 1 of 5 .*Hint: F.fold's stride is 1"),
        (unpatchify_fold_untransposed, r"(?s)case 1 of 5 .*Hint: F.fold takes \(B, C \* p \* p, N\)"),
    ],
)  # fmt: skip
def test_wrong_unpatchify_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_unpatchify(bad)


def chapters_patchify(images, patch):  # section 11.2's patchify
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)  # (B, C, H/p, p, W/p, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, H/p, W/p, C, p, p): patch grid first
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)  # (B, N, C p p)


def test_unpatchify_inverts_the_chapters_patchify():
    from tests.solutions.ch11 import unpatchify

    x = torch.randn(2, 3, 6, 10)
    assert torch.equal(unpatchify(chapters_patchify(x, 2), 2, 6, 10), x)


# ---- exercise 2: the class token's rollout, layer by layer -------------------------------------


def good_by_layer(attentions):
    from mtlib.models import attention_rollout

    return torch.stack(
        [attention_rollout(attentions[: n + 1])[:, 0] for n in range(len(attentions))], 1
    )


def good_by_layer_rows(
    attentions,
):  # a correct variant: keep the full product, take rows at the end
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64, device=attentions[0].device)
    products, r = [], eye
    for w in attentions:
        r = (0.5 * w.double().mean(1) + 0.5 * eye) @ r
        products.append(r)
    return torch.stack(products, dim=1)[:, :, 0].float()


def _by_layer_from(layer_fn, order="left", row=True):
    def fn(attentions):
        r, out = None, []
        for i, w in enumerate(attentions):
            a = layer_fn(i, w)
            r = a if r is None else (a @ r if order == "left" else r @ a)
            out.append(r[:, 0] if row else r[:, :, 0])
        return torch.stack(out, 1)

    return fn


def _half(w):
    return 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])


by_layer_first_raw = _by_layer_from(lambda i, w: w.mean(1) if i == 0 else _half(w))
by_layer_sum_heads = _by_layer_from(lambda i, w: 0.5 * w.sum(1) + 0.5 * torch.eye(w.shape[-1]))
by_layer_reversed = _by_layer_from(lambda i, w: _half(w), order="right")
by_layer_column = _by_layer_from(lambda i, w: _half(w), row=False)
by_layer_no_identity = _by_layer_from(lambda i, w: w.mean(1))


def by_layer_per_head(attentions):
    r, out = None, []
    for w in attentions:
        a = 0.5 * w + 0.5 * torch.eye(w.shape[-1])  # (B, H, T, T)
        r = a if r is None else a @ r
        out.append(r.mean(1)[:, 0])
    return torch.stack(out, 1)


def by_layer_unchained(attentions):
    return torch.stack([_half(w)[:, 0] for w in attentions], 1)


def by_layer_layers_first(attentions):
    return good_by_layer(attentions).transpose(0, 1)


def test_correct_rollouts_by_layer_pass(capsys):
    from tests.solutions.ch11 import rollout_by_layer

    for fn in (good_by_layer, good_by_layer_rows, rollout_by_layer):
        exercises.check_rollout_by_layer(fn)
    assert capsys.readouterr().out.count("check_rollout_by_layer: all 4 cases passed.") == 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (by_layer_per_head, r"(?s)case 1 of 4 .*known mistake\nHint: you rolled out every head on its own"),
        (by_layer_sum_heads, r"(?s)case 1 of 4 .*Hint: you summed over the heads"),
        (by_layer_first_raw, r"(?s)case 1 of 4 .*Hint: your first layer has no residual"),
        (by_layer_reversed, r"(?s)case 1 of 4 .*Hint: you multiplied in the wrong order"),
        (by_layer_unchained, r"(?s)case 1 of 4 .*Hint: each entry is that layer's own row"),
        (by_layer_no_identity, r"(?s)case 1 of 4 .*Hint: you left out the residual connection"),
        (by_layer_column, r"(?s)case 1 of 4 .*Hint: you took column 0"),
        (by_layer_layers_first, r"(?s)case 1 of 4 .*expected shape \(2, 3, 5\), got \(3, 2, 5\).*batch comes first"),
    ],
)  # fmt: skip
def test_wrong_rollouts_by_layer_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_rollout_by_layer(bad)


def eye_on_meta(attentions):  # a new tensor made on another device than the inputs
    rollout = None
    for w in attentions:
        a = 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1], device="meta")
        rollout = a if rollout is None else a @ rollout
    return rollout


def test_rollout_by_layer_stub_device_and_non_callable():
    def stub(attentions):
        raise NotImplementedError("your code here")

    with pytest.raises(exercises.CheckFailed, match=r"raised NotImplementedError: your code here$"):
        exercises.check_rollout_by_layer(stub)
    with pytest.raises(exercises.CheckFailed, match=r"Hint: the inputs are CPU tensors"):
        exercises.check_rollout_by_layer(
            lambda a: eye_on_meta(a)[:, None, 0].expand(-1, len(a), -1)
        )
    with pytest.raises(TypeError, match="takes your function"):
        exercises.check_rollout_by_layer(None)
