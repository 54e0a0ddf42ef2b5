"""Chapter 5's self-checks: correct masks pass, the classic wrong masks are named."""

import pytest
import torch

from mtlib import exercises, masks

# ---- causal ---------------------------------------------------------------------------------


def good_causal(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


def good_causal_arange(n):
    i = torch.arange(n)
    return i[None, :] <= i[:, None]  # key j <= query i


def next_token_visible(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=1)


def no_diagonal(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1)


def transposed(n):  # the "find the bug" function of the chapter
    rows = torch.arange(n)[:, None]
    cols = torch.arange(n)[None, :]
    return rows <= cols


def pytorch_sign(n):
    return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)


def float_causal(n):
    return torch.tril(torch.ones(n, n))


def list_causal(n):
    return good_causal(n).tolist()


def test_correct_causal_masks_pass(capsys):
    exercises.check_causal_mask(good_causal)
    exercises.check_causal_mask(good_causal_arange)
    exercises.check_causal_mask(lambda n: masks.causal_mask(n))
    assert capsys.readouterr().out.count("check_causal_mask: all 3 cases passed.") == 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (next_token_visible, r"(?s)case 1 of 3 .*known mistake\nHint: you allow the next token too"),
        (no_diagonal, r"(?s)case 1 of 3 .*Hint: your mask hides the diagonal"),
        (transposed, r"(?s)case 1 of 3 .*Hint: your mask is the upper triangle"),
        (pytorch_sign, r"(?s)case 1 of 3 .*Hint: your mask has PyTorch's nn.MultiheadAttention sign"),
        (float_causal, r"(?s)case 1 of 3 .*expected a bool tensor, got dtype torch.float32\nHint: return a bool"),
        (list_causal, r"(?s)expected a torch.Tensor, got list"),
    ],
)
def test_wrong_causal_masks_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_causal_mask(bad)


def test_an_unnamed_wrong_causal_mask_is_located():
    def band(n):  # sees only itself and the previous token: not a causal mask
        return good_causal(n) & torch.ones(n, n, dtype=torch.bool).triu(diagonal=-1)

    with pytest.raises(exercises.CheckFailed, match=r"first is at query 2, key 0: you return False"):
        exercises.check_causal_mask(band)


def test_a_stub_raises_without_a_misleading_hint():
    def stub(n):
        raise NotImplementedError("your code here")

    with pytest.raises(exercises.CheckFailed, match=r"raised NotImplementedError: your code here$"):
        exercises.check_causal_mask(stub)


# ---- padding --------------------------------------------------------------------------------


def good_padding(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]


def shows_first_pad(lengths, max_len):
    return (torch.arange(max_len)[None, :] <= lengths[:, None])[:, None, None, :]


def flipped_padding(lengths, max_len):
    return ~good_padding(lengths, max_len)


def flat_padding(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]  # (B, T): no broadcast dims


def left_padding(lengths, max_len):
    return (torch.arange(max_len)[None, :] >= max_len - lengths[:, None])[:, None, None, :]


def float_padding(lengths, max_len):
    return good_padding(lengths, max_len).float()


def in_place(lengths, max_len):
    lengths -= 0  # harmless
    lengths.add_(1)
    return good_padding(lengths - 1, max_len)


def test_correct_padding_masks_pass(capsys):
    exercises.check_padding_mask(good_padding)
    exercises.check_padding_mask(lambda lengths, max_len: masks.padding_mask(lengths, max_len))
    assert capsys.readouterr().out.count("check_padding_mask: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (shows_first_pad, r"(?s)case 1 of 3 .*Hint: your mask lets the first padding position through"),
        (flipped_padding, r"(?s)case 1 of 3 .*Hint: your mask is True at the padding"),
        (flat_padding, r"(?s)case 1 of 3 .*expected shape \(3, 1, 1, 5\), got \(3, 5\)\nHint: return shape"),
        (left_padding, r"(?s)case 1 of 3 .*Hint: your mask is for LEFT padding"),
        (float_padding, r"(?s)expected a bool tensor, got dtype torch.float32"),
        (in_place, r"(?s)changed its input tensor in place"),
    ],
)
def test_wrong_padding_masks_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_padding_mask(bad)


# ---- combined -------------------------------------------------------------------------------


def good_combined(lengths, max_len):
    return masks.combine(masks.causal_mask(max_len), masks.padding_mask(lengths, max_len))


def good_combined_by_hand(lengths, max_len):
    i = torch.arange(max_len)
    causal = i[None, :] <= i[:, None]  # (T, T)
    real = (i[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    return causal & real


def combined_with_or(lengths, max_len):
    return masks.causal_mask(max_len) | good_padding(lengths, max_len)


def padding_on_queries(lengths, max_len):
    return masks.causal_mask(max_len) & good_padding(lengths, max_len).transpose(-2, -1)


def no_head_dim(lengths, max_len):
    return good_combined(lengths, max_len)[:, 0]


def padding_on_queries_and_keys(lengths, max_len):
    keys = good_padding(lengths, max_len)
    return masks.causal_mask(max_len) & keys & keys.transpose(-2, -1)


def combined_pytorch_sign(lengths, max_len):
    return ~good_combined(lengths, max_len)


def combined_next_token(lengths, max_len):
    return torch.ones(max_len, max_len, dtype=torch.bool).tril(1) & good_padding(lengths, max_len)


def combined_upper(lengths, max_len):
    return torch.ones(max_len, max_len, dtype=torch.bool).triu() & good_padding(lengths, max_len)


def combined_no_diagonal(lengths, max_len):
    return torch.ones(max_len, max_len, dtype=torch.bool).tril(-1) & good_padding(lengths, max_len)


def combined_first_pad(lengths, max_len):
    return masks.causal_mask(max_len) & shows_first_pad(lengths, max_len)


def combined_left_padding(lengths, max_len):
    return masks.causal_mask(max_len) & left_padding(lengths, max_len)


def combined_value_error(lengths, max_len):  # an unnamed mistake: two steps of the future
    return torch.ones(max_len, max_len, dtype=torch.bool).tril(2) & good_padding(lengths, max_len)


def forgot_causal(lengths, max_len):
    return good_padding(lengths, max_len).expand(-1, -1, max_len, -1)


def test_correct_combined_masks_pass(capsys):
    exercises.check_combined_mask(good_combined)
    exercises.check_combined_mask(good_combined_by_hand)
    assert capsys.readouterr().out.count("check_combined_mask: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (combined_with_or, r"(?s)case 1 of 3 .*Hint: you combined the masks with OR"),
        (padding_on_queries, r"(?s)case 1 of 3 .*Hint: your padding hides the padded QUERIES"),
        (no_head_dim, r"(?s)case 1 of 3 .*Hint: your mask has shape \(B, T, T\)"),
        (forgot_causal, r"(?s)case 1 of 3 .*Hint: your mask has no causal part"),
        (padding_on_queries_and_keys, r"(?s)case 1 of 3 .*Hint: your padding hides the padded QUERIES"),
        (combined_pytorch_sign, r"(?s)case 1 of 3 .*Hint: your mask has PyTorch's sign"),
        (combined_next_token, r"(?s)case 1 of 3 .*Hint: your causal part lets each query see the next token"),
        (combined_upper, r"(?s)case 1 of 3 .*Hint: your causal part is the upper triangle"),
        (combined_no_diagonal, r"(?s)case 1 of 3 .*Hint: your causal part hides the diagonal"),
        (combined_first_pad, r"(?s)case 1 of 3 .*Hint: your padding part lets the first padding position through"),
        (combined_left_padding, r"(?s)case 1 of 3 .*Hint: your padding part is for LEFT padding"),
        (combined_value_error, r"(?s)entries differ from the reference; the first is at sequence 0, head 0, query 0, key 1.*\nHint: query i of sequence b may attend key j iff j <= i"),
    ],
)
def test_wrong_combined_masks_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_combined_mask(bad)


def test_checkers_refuse_a_non_callable():
    with pytest.raises(TypeError, match="takes your function"):
        exercises.check_causal_mask(torch.ones(3, 3, dtype=torch.bool))


# ---- hints that diagnose rather than dictate, found by the review of chapter 5 ----------------


def test_the_upper_triangle_hint_does_not_give_the_fix():
    with pytest.raises(exercises.CheckFailed) as error:
        exercises.check_causal_mask(transposed)
    assert "upper triangle" in str(error.value) and "tril" not in str(error.value)


def all_true_causal(n):
    return torch.ones(n, n, dtype=torch.bool)


def two_steps_causal(n):
    return torch.ones(n, n, dtype=torch.bool).tril(2)


def broadcast_causal(n):  # right in use, but the exercise asks for (n, n)
    return good_causal(n)[None, None]


def fixed_size_causal(n):
    return good_causal(4)


def additive_causal(n):  # a 0 / -inf bias: works in PyTorch, but it is not a bool mask
    return torch.zeros(n, n).masked_fill(~good_causal(n), float("-inf"))


@pytest.mark.parametrize(
    "bad, match",
    [
        # right shape, wrong entries: the hint is about entries, not about the shape
        (all_true_causal, r"first is at query 0, key 1.*\nHint: row i \(query i\) may attend"),
        (two_steps_causal, r"first is at query 0, key 1.*\nHint: row i \(query i\) may attend"),
        # a broadcastable (1, 1, n, n) mask is right in use: say so
        (broadcast_causal, r"\(1, 1, 4, 4\) mask is right in use \(it broadcasts\)"),
        (fixed_size_causal, r"(?s)case 2 of 3 .*your mask is 4 x 4 for n = 1: build it from n"),
        # an additive 0/-inf bias works in PyTorch: not the float-mask trap
        (additive_causal, r"Hint: your mask is an additive bias \(0 where allowed, -inf where not\)"),
    ],
)  # fmt: skip
def test_causal_hints_match_the_mistake(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_causal_mask(bad)


def ignores_max_len(lengths, max_len):
    return good_padding(lengths, int(lengths.max()))


def padding_on_query_axis(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, :, None]


@pytest.mark.parametrize(
    "bad, match",
    [
        (ignores_max_len, r"(?s)case 2 of 3 .*Hint: your mask has 4 positions, not max_len = 7"),
        (padding_on_query_axis, r"(?s)case 1 of 3 .*Hint: your positions run along the query axis"),
        (lambda lengths, max_len: good_padding(lengths, max_len)[:, 0], r"(?s)expected shape \(3, 1, 1, 5\), got \(3, 1, 5\)\nHint: return shape \(B, 1, 1, max_len\)"),
    ],
)  # fmt: skip
def test_padding_shape_hints_match_the_mistake(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_padding_mask(bad)


def test_an_unnamed_padding_mistake_names_the_head_axis():
    def hides_last_real(lengths, max_len):  # only the first sequence is wrong
        mask = good_padding(lengths, max_len).clone()
        mask[0, 0, 0, 0] = False
        return mask

    with pytest.raises(exercises.CheckFailed, match=r"first is at sequence 0, head 0, query 0, key 0"):
        exercises.check_padding_mask(hides_last_real)


def test_a_device_mismatch_gets_a_device_hint():
    def on_another_device(lengths, max_len):  # as torch.arange(max_len, device="cuda") would
        return (torch.arange(max_len, device="meta") < lengths[:, None])[:, None, None, :]

    with pytest.raises(
        exercises.CheckFailed,
        match=r"(?s)your function raised RuntimeError: .*device.*\nHint: the checker's inputs are on the CPU",
    ):
        exercises.check_padding_mask(on_another_device)
    with pytest.raises(exercises.CheckFailed, match=r"Hint: the checker's inputs are on the CPU"):
        exercises.check_combined_mask(on_another_device)
