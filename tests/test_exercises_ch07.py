"""Chapter 7's self-checks: correct answers pass, the classic wrong answers are named."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises

# ---- SwiGLU at the ReLU FFN's weight count -------------------------------------------------


def swiglu_width(d_model, d_ff):
    if (2 * d_ff) % 3:
        raise ValueError(f"no integer width: 2 * {d_ff} / 3 is not an integer")
    return 2 * d_ff // 3


def swiglu_width_by_count(d_model, d_ff):  # a correct variant: solve 3 d h = 2 d d_ff
    h, rest = divmod(2 * d_model * d_ff, 3 * d_model)
    if rest:
        raise ValueError("no exact match")
    return h


def width_float(d_model, d_ff):
    return 2 * d_ff / 3


def width_inverted(d_model, d_ff):
    return 3 * d_ff // 2


def width_unchanged(d_model, d_ff):
    return d_ff


def width_shazeer(d_model, d_ff):  # 8/3 d: right only when d_ff = 4 d
    return 8 * d_model // 3


def width_truncated(d_model, d_ff):  # no ValueError where no width matches
    return int(2 / 3 * d_ff)


def width_always_raises(d_model, d_ff):
    raise ValueError("SwiGLU cannot match")


def test_correct_swiglu_width_passes(capsys):
    exercises.check_swiglu_width(swiglu_width)
    exercises.check_swiglu_width(swiglu_width_by_count)
    assert capsys.readouterr().out.count("check_swiglu_width: all 4 cases passed.") == 2


def width_asserts(d_model, d_ff):  # the right width, but an assert where none exists
    assert (2 * d_ff) % 3 == 0, "no integer width"
    return 2 * d_ff // 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (width_float, r"(?s)case 1 of 4 .*expected an int, got float 64.0.*Hint: a width counts hidden units"),
        (width_inverted, r"(?s)case 1 of 4 .*your width 144 gives .* 6912 weights; the ReLU FFN has .* 3072"
                         r".*Hint: you inverted the ratio"),
        (width_unchanged, r"(?s)case 1 of 4 .*Hint: at the ReLU FFN's own width SwiGLU has 1.5 times"),
        (width_shazeer, r"(?s)case 1 of 4 \(d_model 16, d_ff 96\).*your width 42 .*Hint: 8/3 \* d_model is the matched width only"),
        (width_truncated, r"(?s)case 4 of 4 .*your width 42 .* 2016 weights.*2048.*Hint: no integer width matches"),
        (width_always_raises, r"(?s)case 1 of 4 .*raised ValueError.*Hint: a SwiGLU width .* exists here"),
        (width_asserts, r"(?s)case 4 of 4 .*raised AssertionError.*Hint: no integer width exists here, and the contract is to raise ValueError \(not AssertionError\)"),
    ],
)  # fmt: skip
def test_wrong_swiglu_width_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_swiglu_width(bad)


def good_swiglu(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def good_swiglu_by_hand(x, w_gate, w_up, w_down):  # a correct variant: z * sigmoid(z), einsum
    z = torch.einsum("...d,dh->...h", x, w_gate)
    return torch.einsum("...h,hd->...d", z * torch.sigmoid(z) * (x @ w_up), w_down)


def swiglu_swapped(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_up) * (x @ w_gate)) @ w_down


def swiglu_sigmoid(x, w_gate, w_up, w_down):
    return (torch.sigmoid(x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_relu(x, w_gate, w_up, w_down):
    return (torch.relu(x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_after_product(x, w_gate, w_up, w_down):
    return F.silu((x @ w_gate) * (x @ w_up)) @ w_down


def swiglu_no_up(x, w_gate, w_up, w_down):
    return F.silu(x @ w_gate) @ w_down


def swiglu_exp_overflow(x, w_gate, w_up, w_down):  # SiLU as z e^z / (1 + e^z): inf / inf
    z = x @ w_gate
    return (z * torch.exp(z) / (1 + torch.exp(z)) * (x @ w_up)) @ w_down


def swiglu_float32(x, w_gate, w_up, w_down):
    return good_swiglu(x.float(), w_gate.float(), w_up.float(), w_down.float())


def swiglu_transposed(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down.T


def swiglu_linear_habit(x, w_gate, w_up, w_down):  # nn.Linear's .weight.T, copied from 7.2
    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def test_correct_swiglu_ffn_passes(capsys):
    exercises.check_swiglu_ffn(good_swiglu)
    exercises.check_swiglu_ffn(good_swiglu_by_hand)
    assert capsys.readouterr().out.count("check_swiglu_ffn: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (swiglu_swapped, r"(?s)case 1 of 3 .*known mistake\nHint: the SiLU goes on the gate"),
        (swiglu_sigmoid, r"(?s)case 1 of 3 .*known mistake\nHint: this gate is a sigmoid"),
        (swiglu_relu, r"(?s)case 1 of 3 .*known mistake\nHint: this gate is a ReLU"),
        (swiglu_after_product, r"(?s)case 1 of 3 .*known mistake\nHint: the SiLU acts on the gate alone"),
        (swiglu_no_up, r"(?s)case 1 of 3 .*known mistake\nHint: your output ignores w_up"),
        (swiglu_exp_overflow, r"(?s)case 3 of 3 .*NaN or inf.*\nHint: the gate's pre-activations reach"),
        (swiglu_float32, r"(?s)case 3 of 3 .*values differ.*\nHint: the gate's pre-activations reach"),
        (swiglu_transposed, r"(?s)case 1 of 3 .*raised RuntimeError.*\nHint: the weights are already in row-vector form"),
        (swiglu_linear_habit, r"(?s)case 1 of 3 .*raised RuntimeError.*\nHint: the weights are already in row-vector form"),
    ],
)  # fmt: skip
def test_wrong_swiglu_ffn_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_swiglu_ffn(bad)


# ---- RMSNorm --------------------------------------------------------------------------------


def good_rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def good_rms_functional(x, weight, eps):  # a correct variant: the library's, or Llama's float32 upcast
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def good_rms_norm_of_vector(x, weight, eps):  # a correct variant: via the L2 norm, rescaled
    d = x.shape[-1]
    return x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + eps) * weight


def rms_centred(x, weight, eps):
    return F.layer_norm(x, x.shape[-1:], eps=eps) * weight


def rms_eps_outside(x, weight, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def rms_no_eps(x, weight, eps):
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * weight


def rms_l2(x, weight, eps):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


def rms_no_weight(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_global(x, weight, eps):  # one mean square for the whole tensor
    return x * torch.rsqrt(x.pow(2).mean() + eps) * weight


def rms_var(x, weight, eps):
    return x / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight


def rms_var_biased(x, weight, eps):
    return x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * weight


def rms_std(x, weight, eps):
    return x / (x.std(-1, keepdim=True) + eps) * weight


def rms_no_keepdim(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1) + eps) * weight


def test_correct_rms_norm_passes(capsys):
    exercises.check_rms_norm_by_hand(good_rms)
    exercises.check_rms_norm_by_hand(good_rms_functional)
    exercises.check_rms_norm_by_hand(good_rms_norm_of_vector)
    assert capsys.readouterr().out.count("check_rms_norm_by_hand: all 3 cases passed.") == 3


@pytest.mark.parametrize(
    "bad, match",
    [
        (rms_centred, r"(?s)case 1 of 3 .*known mistake\nHint: you subtracted the mean: that is LayerNorm"),
        (rms_eps_outside, r"(?s)case 2 of 3 .*known mistake\nHint: eps goes inside the square root"),
        (rms_no_eps, r"(?s)case 2 of 3 .*known mistake\nHint: you left out eps"),
        (rms_l2, r"(?s)case 1 of 3 .*known mistake\nHint: you divided by the L2 norm"),
        (rms_no_weight, r"(?s)case 1 of 3 .*known mistake\nHint: what happened to the gain"),
        (rms_global, r"(?s)case 1 of 3 .*known mistake\nHint: you took one mean square over the whole tensor"),
        (rms_var, r"(?s)case 1 of 3 .*known mistake\nHint: x.var subtracts the mean"),
        (rms_var_biased, r"(?s)case 1 of 3 .*known mistake\nHint: x.var subtracts the mean \(also with correction=0\)"),
        (rms_std, r"(?s)case 1 of 3 .*known mistake\nHint: x.std subtracts the mean"),
        (rms_no_keepdim, r"(?s)case 1 of 3 .*raised RuntimeError"),
    ],
)  # fmt: skip
def test_wrong_rms_norm_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_rms_norm_by_hand(bad)


def test_rms_norm_hard_case_catches_a_statistic_shared_across_rows():
    def global_when_large(x, weight, eps):  # one statistic over the batch, once values are large
        if x.abs().max() > 100:
            return rms_global(x, weight, eps)
        return good_rms(x, weight, eps)

    with pytest.raises(
        exercises.CheckFailed,
        match=r"(?s)case 3 of 3 \(x \(5, 6\) float32: row 1 all zeros .*known mistake\nHint: you took one mean square",
    ):
        exercises.check_rms_norm_by_hand(global_when_large)


# ---- the parallel block ---------------------------------------------------------------------


def parallel(x, attn, ff, norm):
    h = norm(x)
    return x + attn(h) + ff(h)


def parallel_twice_normed(x, attn, ff, norm):  # a correct variant: norm computed twice
    out = x.clone()
    out += ff(norm(x))
    out += attn(norm(x))
    return out


def parallel_sequential(x, attn, ff, norm):
    x = x + attn(norm(x))
    return x + ff(norm(x))


def parallel_normed_residual(x, attn, ff, norm):
    h = norm(x)
    return h + attn(h) + ff(h)


def parallel_tuple(x, attn, ff, norm):
    h = norm(x)
    return x + attn(h)[0] + ff(h)


def parallel_ff_raw(x, attn, ff, norm):
    return x + attn(norm(x)) + ff(x)


def parallel_two_residuals(x, attn, ff, norm):
    h = norm(x)
    return (x + attn(h)) + (x + ff(h))


def parallel_post(x, attn, ff, norm):
    return norm(x + attn(x) + ff(x))


def parallel_halved(x, attn, ff, norm):  # an average of the sublayers: no named mistake
    h = norm(x)
    return x + (attn(h) + ff(h)) / 2


def test_correct_parallel_block_passes(capsys):
    exercises.check_parallel_block(parallel)
    exercises.check_parallel_block(parallel_twice_normed)
    assert capsys.readouterr().out.count("check_parallel_block: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (parallel_sequential, r"(?s)case 1 of 3 .*known mistake\nHint: this is the sequential Pre-LN block"),
        (parallel_normed_residual, r"(?s)case 1 of 3 .*known mistake\nHint: your residual adds the normalised input"),
        (parallel_tuple, r"(?s)case 1 of 3 .*known mistake\nHint: attn here is a plain function"),
        (parallel_ff_raw, r"(?s)case 1 of 3 .*known mistake\nHint: your FFN reads the raw x"),
        (parallel_two_residuals, r"(?s)case 1 of 3 .*known mistake\nHint: you added x twice"),
        (parallel_post, r"(?s)case 1 of 3 .*known mistake\nHint: you normalised after the sum"),
        (parallel_halved, r"(?s)case 1 of 3 .*values differ.*\nHint: which tensor does each sublayer read"),
    ],
)  # fmt: skip
def test_wrong_parallel_block_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_parallel_block(bad)


# ---- devices --------------------------------------------------------------------------------


def test_a_result_on_another_device_is_reported_in_words():
    def parallel_on_meta(x, attn, ff, norm):
        return parallel(x, attn, ff, norm).to("meta")

    def rms_on_meta(x, weight, eps):
        return good_rms(x.to("meta"), weight.to("meta"), eps)

    def rms_mixed_devices(x, weight, eps):
        return good_rms(x, weight, eps) + torch.zeros(x.shape[-1], device="meta")

    meta = r"(?s)case 1 of 3 .*meta device, which holds no values to compare\nHint: the inputs are CPU"
    with pytest.raises(exercises.CheckFailed, match=meta):
        exercises.check_parallel_block(parallel_on_meta)
    with pytest.raises(exercises.CheckFailed, match=meta):
        exercises.check_rms_norm_by_hand(rms_on_meta)
    with pytest.raises(exercises.CheckFailed, match=r"(?s)case 1 of 3 .*raised RuntimeError.*meta.*\nHint: the inputs are CPU"):
        exercises.check_rms_norm_by_hand(rms_mixed_devices)


def test_hints_never_show_the_solution():
    """A mistake's hint names it; none prints a line of the reference solutions."""
    wrong = [
        (exercises.check_swiglu_ffn, swiglu_swapped),
        (exercises.check_swiglu_ffn, lambda *a: 2 * good_swiglu(*a)),
        (exercises.check_rms_norm_by_hand, rms_centred),
        (exercises.check_rms_norm_by_hand, lambda *a: 2 * good_rms(*a)),
        (exercises.check_parallel_block, parallel_sequential),
        (exercises.check_parallel_block, parallel_halved),
    ]
    for checker, bad in wrong:
        with pytest.raises(exercises.CheckFailed) as info:
            checker(bad)
        message = str(info.value)
        for solution in ("x + attn(h) + ff(h)", "F.silu(x @ w_gate)", "silu(gate) * up",
                         "x / torch.sqrt", "rsqrt", "x + attn(norm(x))"):  # fmt: skip
            assert solution not in message, message


def test_stubs_report_not_implemented():
    def stub(*args):
        raise NotImplementedError("your code here")

    for checker in (
        exercises.check_swiglu_width,
        exercises.check_swiglu_ffn,
        exercises.check_rms_norm_by_hand,
        exercises.check_parallel_block,
    ):
        with pytest.raises(exercises.CheckFailed, match="raised NotImplementedError"):
            checker(stub)
