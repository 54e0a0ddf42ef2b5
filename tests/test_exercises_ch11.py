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
