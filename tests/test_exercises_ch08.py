"""Chapter 8's self-checks: correct answers pass, the typical wrong ones are named."""

import pytest
import torch
import torch.nn.functional as F

from mtlib import exercises

# ---- shift_right ----------------------------------------------------------------------------


def good_shift(labels, bos_id):
    bos = torch.full((labels.shape[0], 1), bos_id, dtype=labels.dtype)
    return torch.cat([bos, labels[:, :-1]], dim=1)


def good_shift_roll(labels, bos_id):  # a correct variant
    out = labels.roll(1, dims=1)
    out[:, 0] = bos_id
    return out


def unchanged(labels, bos_id):
    return labels.clone()


def shifted_left(labels, bos_id):
    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], bos_id)], dim=1)


def bos_at_end(labels, bos_id):
    return torch.cat([labels[:, :-1], torch.full_like(labels[:, :1], bos_id)], dim=1)


def last_kept(labels, bos_id):
    return torch.cat([torch.full_like(labels[:, :1], bos_id), labels], dim=1)


def batch_dim(labels, bos_id):
    return torch.cat([torch.full_like(labels[:1], bos_id), labels[:-1]], dim=0)


def float_shift(labels, bos_id):
    return good_shift(labels, bos_id).float()


def literal_eos_dropped(labels, bos_id):  # "BOS y1 .. yn" read literally: EOS becomes a pad
    out = good_shift(labels, bos_id)
    return out.masked_fill(out == 2, 0)


def hard_coded_bos(labels, bos_id):
    return torch.cat([torch.ones_like(labels[:, :1]), labels[:, :-1]], dim=1)


def test_correct_shifts_pass(capsys):
    exercises.check_shift_right(good_shift)
    exercises.check_shift_right(good_shift_roll)
    assert capsys.readouterr().out.count("check_shift_right: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (unchanged, r"(?s)case 1 of 3 .*known mistake\nHint: you return the labels unchanged"),
        (shifted_left, r"(?s)case 1 of 3 .*Hint: you shifted LEFT"),
        (bos_at_end, r"(?s)case 1 of 3 .*Hint: you appended BOS at the END"),
        (last_kept, r"(?s)case 1 of 3 .*Hint: you kept the last label"),
        (batch_dim, r"(?s)case 1 of 3 .*Hint: you shifted along the batch dimension"),
        (literal_eos_dropped, r"(?s)case 1 of 3 .*Hint: you turned EOS into a pad"),
        (hard_coded_bos, r"(?s)case 2 of 3 .*Hint: you hard-coded BOS as 1: use the bos_id argument"),
        (float_shift, r"(?s)case 1 of 3 .*expected token ids of dtype torch.int64"),
    ],
)
def test_wrong_shifts_are_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_shift_right(bad)


def test_shift_stub_and_in_place_edits_are_reported():
    def stub(labels, bos_id):
        raise NotImplementedError("write it")

    def in_place(labels, bos_id):
        labels[:, 1:] = labels[:, :-1].clone()
        labels[:, 0] = bos_id
        return labels

    with pytest.raises(exercises.CheckFailed, match="raised NotImplementedError: write it$"):
        exercises.check_shift_right(stub)
    with pytest.raises(exercises.CheckFailed, match="changed its input tensor in place"):
        exercises.check_shift_right(in_place)


# ---- greedy decoding ------------------------------------------------------------------------


def good_greedy(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    while len(tokens) < max_len:
        tokens.append(int(step(tokens).argmax()))
        if tokens[-1] == eos_id:
            break
    return tokens


def good_greedy_tensor(step, *, bos_id, eos_id, max_len):  # a correct variant: a tensor
    ys = torch.tensor([bos_id])
    for _ in range(max_len - 1):
        ys = torch.cat([ys, step(ys).argmax().view(1)])
        if ys[-1] == eos_id:
            break
    return ys


def last_token_only(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    while len(tokens) < max_len:
        tokens.append(int(step(tokens[-1:]).argmax()))
        if tokens[-1] == eos_id:
            break
    return tokens


def no_stop(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    while len(tokens) < max_len:
        tokens.append(int(step(tokens).argmax()))
    return tokens


def one_too_many(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    for _ in range(max_len):  # max_len new tokens: one more than allowed
        tokens.append(int(step(tokens).argmax()))
        if tokens[-1] == eos_id:
            break
    return tokens


def without_bos(step, *, bos_id, eos_id, max_len):
    return good_greedy(step, bos_id=bos_id, eos_id=eos_id, max_len=max_len)[1:]


def without_eos(step, *, bos_id, eos_id, max_len):
    tokens = good_greedy(step, bos_id=bos_id, eos_id=eos_id, max_len=max_len)
    return tokens[:-1] if tokens[-1] == eos_id else tokens


def one_too_few(step, *, bos_id, eos_id, max_len):
    tokens = [bos_id]
    for _ in range(max_len - 2):  # max_len - 2 new tokens: one fewer than allowed
        tokens.append(int(step(tokens).argmax()))
        if tokens[-1] == eos_id:
            break
    return tokens


def eos_forced(step, *, bos_id, eos_id, max_len):
    tokens = good_greedy(step, bos_id=bos_id, eos_id=eos_id, max_len=max_len)
    return tokens if tokens[-1] == eos_id else tokens[:-1] + [eos_id]


def tensor_items(step, *, bos_id, eos_id, max_len):  # 0-d tensors instead of ints
    tokens = [bos_id]
    while len(tokens) < max_len:
        tokens.append(step(tokens).argmax())
        if tokens[-1] == eos_id:
            break
    return tokens


def test_correct_greedy_passes(capsys):
    exercises.check_greedy_decode(good_greedy)
    exercises.check_greedy_decode(good_greedy_tensor)
    assert capsys.readouterr().out.count("check_greedy_decode: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (last_token_only, r"(?s)case 1 of 3 .*Hint: you pass only the last token"),
        (no_stop, r"(?s)case 1 of 3 .*Hint: you keep going after EOS"),
        (one_too_many, r"(?s)case 2 of 3 .*Hint: max_len counts every token including BOS: one token too many"),
        (one_too_few, r"(?s)case 2 of 3 .*Hint: max_len counts every token including BOS: one token too few"),
        (eos_forced, r"(?s)case 2 of 3 .*Hint: you put EOS in the last slot"),
        (tensor_items, r"(?s)case 1 of 3 .*holding tensors\nHint: convert each token with int"),
        (without_bos, r"(?s)case 1 of 3 .*Hint: return the sequence with BOS first"),
        (without_eos, r"(?s)case 1 of 3 .*Hint: keep the EOS"),
    ],
)
def test_wrong_greedy_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_greedy_decode(bad)


# ---- label smoothing ------------------------------------------------------------------------


def good_smoothing(logits, targets, epsilon):
    log_p = logits.log_softmax(-1)  # (N, n_vocab)
    q = torch.full_like(log_p, epsilon / logits.shape[-1])
    q[torch.arange(len(targets)), targets] += 1 - epsilon
    return -(q * log_p).sum(-1).mean()


def good_smoothing_torch(logits, targets, epsilon):  # a correct variant
    return F.cross_entropy(logits, targets, label_smoothing=epsilon)


def over_wrong_classes(logits, targets, epsilon):
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, epsilon / (logits.shape[-1] - 1))
    q[torch.arange(len(targets)), targets] = 1 - epsilon
    return -(q * log_p).sum(-1).mean()


def no_smoothing(logits, targets, epsilon):
    return F.cross_entropy(logits, targets)


def summed(logits, targets, epsilon):
    return F.cross_entropy(logits, targets, label_smoothing=epsilon, reduction="sum")


def scaled_only(logits, targets, epsilon):
    return (1 - epsilon) * F.cross_entropy(logits, targets)


def naive_log_softmax(logits, targets, epsilon):  # overflows near 1000
    p = logits.exp() / logits.exp().sum(-1, keepdim=True)
    q = torch.full_like(p, epsilon / logits.shape[-1])
    q[torch.arange(len(targets)), targets] += 1 - epsilon
    return -(q * p.log()).sum(-1).mean()


def log_of_softmax(logits, targets, epsilon):  # stable softmax, but log(0) where logits are far apart
    q = torch.full_like(logits, epsilon / logits.shape[-1])
    q[torch.arange(len(targets)), targets] += 1 - epsilon
    return -(q * logits.softmax(-1).log()).sum(-1).mean()


def kl_divergence(logits, targets, epsilon):  # the Annotated Transformer's KLDivLoss form
    q = torch.full_like(logits, epsilon / logits.shape[-1])
    q[torch.arange(len(targets)), targets] += 1 - epsilon
    return F.kl_div(logits.log_softmax(-1), q, reduction="batchmean")


def test_correct_smoothing_passes(capsys):
    exercises.check_label_smoothing_loss(good_smoothing)
    exercises.check_label_smoothing_loss(good_smoothing_torch)
    assert capsys.readouterr().out.count("check_label_smoothing_loss: all 3 cases passed.") == 2


@pytest.mark.parametrize(
    "bad, match",
    [
        (over_wrong_classes, r"(?s)case 1 of 3 .*Hint: you spread epsilon over the n_vocab - 1 WRONG"),
        (no_smoothing, r"(?s)case 1 of 3 .*Hint: your loss ignores epsilon"),
        (summed, r"(?s)case 1 of 3 .*Hint: you return the sum over rows"),
        (scaled_only, r"(?s)case 1 of 3 .*Hint: you scaled the cross-entropy"),
        (kl_divergence, r"(?s)case 1 of 3 .*Hint: your loss is the cross-entropy minus a constant"),
        (naive_log_softmax, r"(?s)case 3 of 3 .*NaN"),
        (log_of_softmax, r"(?s)case 3 of 3 .*NaN or inf.*log_softmax"),
    ],
)
def test_wrong_smoothing_is_named(bad, match):
    with pytest.raises(exercises.CheckFailed, match=match):
        exercises.check_label_smoothing_loss(bad)
