"""Chapter 11's self-checks: correct answers pass, the typical wrong ones are named."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises

# ---- patches --------------------------------------------------------------------------------


def good_patches(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)  # (B, C, r, p, c, p)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c * patch * patch)


def good_patches_unfold(images, patch):  # a correct variant: F.unfold, then transpose
    return F.unfold(images, kernel_size=patch, stride=patch).transpose(1, 2)


def good_patches_loop(images, patch):  # a correct variant: explicit loops
    b, c, h, w = images.shape
    out = []
    for r in range(0, h, patch):
        for col in range(0, w, patch):
            out.append(images[:, :, r : r + patch, col : col + patch].reshape(b, -1))
    return torch.stack(out, dim=1)


def plain_reshape(images, patch):
    return images.reshape(images.shape[0], -1, images.shape[1] * patch * patch)


def column_major(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 4, 2, 1, 3, 5).reshape(b, -1, c * patch * patch)


def channels_last(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(b, -1, c * patch * patch)


def unfold_untransposed(images, patch):
    return F.unfold(images, kernel_size=patch, stride=patch)


def pixels_by_column(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 5, 3).reshape(b, -1, c * patch * patch)


def test_correct_patches_pass(capsys):
    for fn in (good_patches, good_patches_unfold, good_patches_loop):
        exercises.check_patch_embedding(fn)
    assert capsys.readouterr().out.count("check_patch_embedding: all 4 cases passed.") == 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (plain_reshape, r"(?s)case 1 of 4 .*known mistake\nHint: a plain reshape mixes pixels"),
        (column_major, r"(?s)case 1 of 4 .*Hint: your patches are in column-major order"),
        (channels_last, r"(?s)case 2 of 4 .*Hint: you flattened each patch channels-last"),
        (unfold_untransposed, r"(?s)case 1 of 4 .*expected shape \(2, 16, 4\), got \(2, 4, 16\).*one patch per ROW"),
        (pixels_by_column, r"(?s)case 1 of 4 .*Hint: inside a patch you read the pixels column by column"),
    ],
)  # fmt: skip
def test_wrong_patches_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_patch_embedding(bad)


def test_patch_stub_is_reported_without_a_hint():
    def stub(images, patch):
        raise NotImplementedError("your code here")

    with pytest.raises(exercises.CheckFailed, match=r"raised NotImplementedError: your code here$"):
        exercises.check_patch_embedding(stub)


# ---- attention rollout ----------------------------------------------------------------------


def good_rollout(attentions):
    rollout = None
    for w in attentions:
        a = 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def good_rollout_normalised(attentions):  # a correct variant: renormalise rows, stack, reduce
    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    layers = [(w.double().mean(1) + eye) / 2 for w in attentions]
    layers = [a / a.sum(-1, keepdim=True) for a in layers]
    out = layers[0]
    for a in layers[1:]:
        out = torch.bmm(a, out)
    return out.float()


def reversed_order(attentions):
    rollout = None
    for w in attentions:
        a = 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])
        rollout = a if rollout is None else rollout @ a
    return rollout


def no_identity(attentions):
    rollout = None
    for w in attentions:
        a = w.mean(1)
        rollout = a if rollout is None else a @ rollout
    return rollout


def identity_unhalved(attentions):
    rollout = None
    for w in attentions:
        a = w.mean(1) + torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def max_heads(attentions):
    rollout = None
    for w in attentions:
        a = 0.5 * w.amax(1) + 0.5 * torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def last_layer(attentions):
    return 0.5 * attentions[-1].mean(1) + 0.5 * torch.eye(attentions[-1].shape[-1])


def test_correct_rollouts_pass(capsys):
    exercises.check_attention_rollout(good_rollout)
    exercises.check_attention_rollout(good_rollout_normalised)
    assert capsys.readouterr().out.count("check_attention_rollout: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (reversed_order, r"(?s)case 1 of 3 .*known mistake\nHint: you multiplied in the wrong order"),
        (no_identity, r"(?s)case 1 of 3 .*Hint: you left out the residual connection"),
        (identity_unhalved, r"(?s)case 1 of 3 .*Hint: you added the identity without halving"),
        (max_heads, r"(?s)case 1 of 3 .*Hint: you took the maximum over heads"),
        (last_layer, r"(?s)case 1 of 3 .*Hint: you used the last layer only"),
    ],
)  # fmt: skip
def test_wrong_rollouts_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_attention_rollout(bad)


def test_rollout_in_place_edit_is_reported():
    def in_place(attentions):
        attentions[0].mul_(0.5)
        return good_rollout(attentions)

    with pytest.raises(
        exercises.CheckFailed, match="changed its input tensor in place|known mistake|differ"
    ):
        exercises.check_attention_rollout(in_place)


# ---- rollout with a residual weight alpha ------------------------------------------------------


def good_alpha_rollout(attentions, alpha):
    rollout = None
    for w in attentions:
        a = (1 - alpha) * w.mean(1) + alpha * torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def good_alpha_rollout_reduce(attentions, alpha):  # a correct variant: einsum, then reduce
    import functools

    eye = torch.eye(attentions[0].shape[-1], dtype=torch.float64)
    layers = [
        torch.lerp(torch.einsum("bhij->bij", w.double()) / w.shape[1], eye, alpha)
        for w in attentions
    ]
    return functools.reduce(lambda r, a: a @ r, layers[1:], layers[0])


def alpha_swapped(attentions, alpha):
    return good_alpha_rollout(attentions, 1 - alpha)


def alpha_ignored(attentions, alpha):
    return good_alpha_rollout(attentions, 0.5)


def alpha_reversed_order(attentions, alpha):
    rollout = None
    for w in attentions:
        a = (1 - alpha) * w.mean(1) + alpha * torch.eye(w.shape[-1])
        rollout = a if rollout is None else rollout @ a
    return rollout


def alpha_unscaled(attentions, alpha):
    rollout = None
    for w in attentions:
        a = w.mean(1) + alpha * torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def alpha_max_heads(attentions, alpha):
    rollout = None
    for w in attentions:
        a = (1 - alpha) * w.amax(1) + alpha * torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def alpha_last_layer(attentions, alpha):
    w = attentions[-1]
    return (1 - alpha) * w.mean(1) + alpha * torch.eye(w.shape[-1])


def test_correct_alpha_rollouts_pass(capsys):
    exercises.check_alpha_rollout(good_alpha_rollout)
    exercises.check_alpha_rollout(good_alpha_rollout_reduce)
    assert capsys.readouterr().out.count("check_alpha_rollout: all 4 cases passed.") == 2


def test_alpha_rollout_matches_mtlib_at_one_half():
    g = torch.Generator().manual_seed(3)
    attentions = [torch.rand(2, 3, 5, 5, generator=g).softmax(-1) for _ in range(3)]
    from mtlib.models import attention_rollout

    torch.testing.assert_close(good_alpha_rollout(attentions, 0.5), attention_rollout(attentions))
    torch.testing.assert_close(
        good_alpha_rollout(attentions, 0.0), attention_rollout(attentions, residual=False)
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        (alpha_swapped, r"(?s)case 1 of 4 .*known mistake\nHint: alpha weighs the identity"),
        (alpha_ignored, r"(?s)case 1 of 4 .*Hint: your result does not change with alpha"),
        (alpha_reversed_order, r"(?s)case 1 of 4 .*Hint: you multiplied in the wrong order"),
        (alpha_unscaled, r"(?s)case 1 of 4 .*Hint: you added alpha \* I to the full weights"),
        (alpha_max_heads, r"(?s)case 1 of 4 .*Hint: you took the maximum over heads"),
        (alpha_last_layer, r"(?s)case 1 of 4 .*Hint: you used the last layer only"),
    ],
)  # fmt: skip
def test_wrong_alpha_rollouts_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_alpha_rollout(bad)


def test_alpha_rollout_stub_and_non_callable():
    def stub(attentions, alpha):
        raise NotImplementedError("your code here")

    with pytest.raises(exercises.CheckFailed, match="NotImplementedError"):
        exercises.check_alpha_rollout(stub)
    with pytest.raises(TypeError, match="takes your function"):
        exercises.check_alpha_rollout(None)


# ---- new rollout mistakes, on the existing checkers ----------------------------------------


def per_head_then_mean(attentions):
    rollout = None
    for w in attentions:
        a = 0.5 * w + 0.5 * torch.eye(w.shape[-1])  # (B, H, T, T): every head on its own
        rollout = a if rollout is None else a @ rollout
    return rollout.mean(1)


def sum_heads(attentions):
    rollout = None
    for w in attentions:
        a = 0.5 * w.sum(1) + 0.5 * torch.eye(w.shape[-1])
        rollout = a if rollout is None else a @ rollout
    return rollout


def first_layer_raw(attentions):
    rollout = attentions[0].mean(1)  # the identity skipped on layer 1
    for w in attentions[1:]:
        rollout = (0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])) @ rollout
    return rollout


def eye_on_meta(attentions):  # a new tensor made on another device than the inputs
    rollout = None
    for w in attentions:
        a = 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1], device="meta")
        rollout = a if rollout is None else a @ rollout
    return rollout


@pytest.mark.parametrize(
    "bad, match",
    [
        (per_head_then_mean, r"(?s)case 1 of 3 .*Hint: you rolled out every head on its own"),
        (sum_heads, r"(?s)case 1 of 3 .*Hint: you summed over the heads"),
        (first_layer_raw, r"(?s)case 1 of 3 .*Hint: your first layer has no residual"),
        (eye_on_meta, r"(?s)case 1 of 3 .*device.*\nHint: the inputs are CPU tensors"),
    ],
)  # fmt: skip
def test_head_and_layer_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_attention_rollout(bad)


def test_generic_rollout_hint_does_not_give_the_formula():
    def transposed(attentions):
        return good_rollout(attentions).mT

    with pytest.raises(exercises.CheckFailed) as info:
        exercises.check_alpha_rollout(lambda a, al: transposed(a))
    assert "A_l =" not in str(info.value) and "?" in str(info.value)


def patches_overlapping(images, patch):  # F.unfold without stride=patch
    return F.unfold(images, kernel_size=patch).transpose(1, 2)


def patches_tensor_unfold_unpermuted(images, patch):
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)  # (B, C, r, c, p, p)
    return x.reshape(images.shape[0], -1, images.shape[1] * patch * patch)


def test_patch_unfold_mistakes_are_named():
    with pytest.raises(exercises.CheckFailed, match=r"(?s)49 patches, not 16.*stride=patch"):
        exercises.check_patch_embedding(patches_overlapping)
    with pytest.raises(exercises.CheckFailed, match=r"(?s)case 2 of 4 .*Hint: after Tensor.unfold"):
        exercises.check_patch_embedding(patches_tensor_unfold_unpermuted)


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


def test_unpatchify_inverts_the_chapters_patchify():
    from tests.solutions.ch11 import patch_embedding, unpatchify

    x = torch.randn(2, 3, 6, 10)
    assert torch.equal(unpatchify(patch_embedding(x, 2), 2, 6, 10), x)


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


def alpha_per_head(attentions, alpha):
    rollout = None
    for w in attentions:
        a = (1 - alpha) * w + alpha * torch.eye(w.shape[-1])  # (B, H, T, T)
        rollout = a if rollout is None else a @ rollout
    return rollout.mean(1)


def alpha_first_raw(attentions, alpha):
    rollout = attentions[0].mean(1)
    for w in attentions[1:]:
        rollout = ((1 - alpha) * w.mean(1) + alpha * torch.eye(w.shape[-1])) @ rollout
    return rollout


@pytest.mark.parametrize(
    "bad, match",
    [
        (alpha_per_head, r"(?s)case 1 of 4 .*Hint: you rolled out every head on its own"),
        (alpha_first_raw, r"(?s)case 1 of 4 .*Hint: your first layer has no residual"),
    ],
)  # fmt: skip
def test_alpha_head_and_layer_mistakes_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_alpha_rollout(bad)
