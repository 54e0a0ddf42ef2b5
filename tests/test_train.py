"""Tests of mtlib.train: schedule values at known steps, the loss, and the fit loop.

The loop tests use a tiny model with dropout (so the RNG matters) on a regression task whose
batches are a function of the step; sizes are distinct (d_in=5, d_out=3, batch 7).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import train

D_IN, D_OUT, BATCH = 5, 3, 7
W_TRUE = torch.randn(D_IN, D_OUT, generator=torch.Generator().manual_seed(123))


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D_IN, 11), nn.Dropout(0.2), nn.ReLU(), nn.Linear(11, D_OUT))


def batches(step: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, D_IN, generator=g)
    return x, x @ W_TRUE


def mse(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


def held_out(model: nn.Module) -> dict[str, float]:
    x, y = batches(10**6)
    return {"mse": F.mse_loss(model(x), y).item(), "training": float(model.training)}


# ------------------------------------------------------------------ schedules


def test_constant() -> None:
    f = train.constant()
    assert [f(s) for s in (0, 1, 10**6)] == [1.0, 1.0, 1.0]


def test_warmup_cosine_values() -> None:
    f = train.warmup_cosine(4, 14)
    assert [f(s) for s in range(5)] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])
    assert f(9) == pytest.approx(0.5)  # halfway through the decay: (1 + cos(pi/2)) / 2
    assert f(14) == pytest.approx(0.0, abs=1e-12)
    assert f(100) == pytest.approx(0.0, abs=1e-12)  # stays at the floor
    g = train.warmup_cosine(4, 14, min_factor=0.1)
    assert g(9) == pytest.approx(0.1 + 0.9 * 0.5)
    assert g(14) == pytest.approx(0.1) and g(50) == pytest.approx(0.1)
    h = train.warmup_cosine(0, 10)  # no warm-up: cosine from step 0
    assert h(0) == 1.0 and h(5) == pytest.approx(0.5)
    values = [f(s) for s in range(4, 15)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))  # decreasing


def test_inverse_sqrt_paper_formula() -> None:
    d, w = 512, 4000
    f = train.inverse_sqrt(w, d_model=d)
    for step in (0, 99, 3998, 3999, 4000, 9999, 99999):
        n = step + 1
        assert f(step) == pytest.approx(d**-0.5 * min(n**-0.5, n * w**-1.5))
    peak = max(range(8000), key=f)
    assert peak == w - 1  # n = step + 1 = warmup
    assert f(w - 1) == pytest.approx(d**-0.5 * w**-0.5)  # about 7.0e-4, the paper's peak
    assert f(w - 1) == pytest.approx(6.99e-4, rel=1e-3)


def test_inverse_sqrt_normalised() -> None:
    f = train.inverse_sqrt(10)
    assert f(9) == pytest.approx(1.0)  # the peak
    assert f(0) == pytest.approx(0.1)  # linear warm-up: n / warmup
    assert f(39) == pytest.approx(0.5)  # sqrt(10 / 40)
    assert max(f(s) for s in range(100)) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: train.warmup_cosine(-1, 10), ValueError, "warmup must be an int >= 0"),
        (lambda: train.warmup_cosine(10, 10), ValueError, "total must be an int > warmup=10"),
        (lambda: train.warmup_cosine(2, 10, min_factor=1.5), ValueError, "min_factor"),
        (lambda: train.inverse_sqrt(0), ValueError, "warmup must be >= 1"),
        (lambda: train.inverse_sqrt(4, d_model=2.5), TypeError, "d_model must be an int"),
    ],
)
def test_schedule_errors(call, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        call()


def test_schedules_work_with_lambda_lr() -> None:
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, train.warmup_cosine(2, 6))
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.2, 0.4, 0.4, 0.4 * (1 + math.cos(math.pi / 4)) / 2])


# ------------------------------------------------------------------ loss


def test_sequence_loss_ignores_padding() -> None:
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 6)
    targets = torch.tensor([[1, 2, 0, 0], [3, 4, 5, 0]])
    real = targets != 0
    expected = F.cross_entropy(logits[real], targets[real])
    torch.testing.assert_close(train.sequence_loss(logits, targets, pad_id=0), expected)
    # padding changes nothing when its logits change
    logits2 = logits.clone()
    logits2[~real] = 100.0
    torch.testing.assert_close(train.sequence_loss(logits2, targets, pad_id=0), expected)
    # without pad_id every position counts
    all_tokens = F.cross_entropy(logits.reshape(-1, 6), targets.reshape(-1))
    torch.testing.assert_close(train.sequence_loss(logits, targets), all_tokens)


def test_sequence_loss_label_smoothing() -> None:
    torch.manual_seed(2)
    logits, targets, eps = torch.randn(3, 5, 7), torch.randint(1, 7, (3, 5)), 0.1
    targets[0, 3:] = 0
    real = targets != 0
    logp = logits.log_softmax(-1)[real]  # (N, V)
    nll = -logp.gather(1, targets[real][:, None]).squeeze(1)
    expected = ((1 - eps) * nll - eps * logp.mean(-1)).mean()  # smoothed target: eps/V each
    got = train.sequence_loss(logits, targets, pad_id=0, label_smoothing=eps)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    ("logits", "targets", "kwargs", "error", "message"),
    [
        (torch.randn(2, 4), torch.zeros(2, 4, dtype=torch.long), {}, ValueError, "logits must"),
        (torch.randn(2, 4, 6), torch.zeros(2, 4), {}, TypeError, "targets must be a long"),
        (torch.randn(2, 4, 6), torch.zeros(2, 5, dtype=torch.long), {}, ValueError, r"seq_len=4"),
        (
            torch.randn(2, 4, 6),
            torch.zeros(2, 4, dtype=torch.long),
            {"label_smoothing": 1.0},
            ValueError,
            "label_smoothing",
        ),
    ],
)
def test_sequence_loss_errors(logits, targets, kwargs, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        train.sequence_loss(logits, targets, **kwargs)


# ------------------------------------------------------------------ fit


def test_fit_loss_decreases_and_records() -> None:
    model = make_model()
    model.eval()  # fit must restore this mode
    hist = train.fit(
        model, mse, batches, steps=60, lr=1e-2, eval_fn=held_out, eval_every=20, seed=0
    )
    assert hist.steps == list(range(60))
    assert len(hist.loss) == len(hist.lr) == len(hist.grad_norm) == 60
    first, last = sum(hist.loss[:5]) / 5, sum(hist.loss[-5:]) / 5
    assert last < 0.6 * first, (first, last)  # 0.27 to 0.39 over seeds 0-4
    assert [e["step"] for e in hist.evals] == [20, 40, 60]
    assert all(e["training"] == 0.0 for e in hist.evals)  # eval_fn ran in eval mode
    assert hist.last_eval()["mse"] < hist.evals[0]["mse"]
    assert not model.training and not hist.stopped_early
    assert hist.lr == [1e-2] * 60


def test_fit_is_deterministic_and_eval_does_not_touch_the_rng() -> None:
    def noisy_eval(model: nn.Module) -> dict[str, float]:
        return {"r": torch.rand(()).item()}  # consumes the RNG

    a = train.fit(make_model(), mse, batches, steps=15, seed=3)
    b = train.fit(make_model(), mse, batches, steps=15, seed=3, eval_fn=noisy_eval, eval_every=4)
    assert a.loss == b.loss  # bitwise, dropout included
    c = train.fit(make_model(), mse, batches, steps=15, seed=4)
    assert a.loss != c.loss  # the seed drives dropout


def test_fit_schedule_sets_the_lr() -> None:
    hist = train.fit(
        make_model(), mse, batches, steps=8, lr=0.1, schedule=train.warmup_cosine(4, 8)
    )
    assert hist.lr == pytest.approx([0.1 * train.warmup_cosine(4, 8)(s) for s in range(8)])
    # a given optimizer: its own lr is the base
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    hist = train.fit(model, mse, batches, steps=3, optimizer=opt, schedule=train.inverse_sqrt(2))
    assert hist.lr == pytest.approx([0.01, 0.02, 0.02 * (2 / 3) ** 0.5])


class _RecordingSGD(torch.optim.SGD):
    """SGD that records the global gradient norm it actually applies."""

    applied: list[float]

    def step(self, closure=None):  # type: ignore[no-untyped-def, override]
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        self.applied.append(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item())
        return super().step(closure)


def test_clipping_bounds_the_applied_norm() -> None:
    def big_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        return 100.0 * mse(model, batch)

    model = make_model()
    opt = _RecordingSGD(model.parameters(), lr=1e-4)
    opt.applied = []
    hist = train.fit(model, big_loss, batches, steps=10, optimizer=opt, clip_norm=0.5, seed=0)
    assert min(hist.grad_norm) > 0.5  # recorded before clipping
    assert max(opt.applied) <= 0.5 * (1 + 1e-5)
    assert opt.applied == pytest.approx([0.5] * 10, rel=1e-4)
    # without clipping, the applied norm is the recorded one
    model = make_model()
    opt = _RecordingSGD(model.parameters(), lr=1e-4)
    opt.applied = []
    hist = train.fit(model, big_loss, batches, steps=5, optimizer=opt, seed=0)
    assert opt.applied == pytest.approx(hist.grad_norm, rel=1e-5)


def test_early_stop() -> None:
    hist = train.fit(
        make_model(),
        mse,
        batches,
        steps=500,
        lr=1e-2,
        eval_fn=held_out,
        eval_every=5,
        stop_when=lambda m: m["mse"] < 0.5,
        seed=0,
    )
    assert hist.stopped_early
    assert hist.last_eval()["mse"] < 0.5
    assert all(e["mse"] >= 0.5 for e in hist.evals[:-1])
    assert len(hist.loss) == hist.last_eval()["step"] < 500


def test_resume_gives_the_same_next_step(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt.pt"
    kwargs = {"lr": 3e-3, "schedule": train.warmup_cosine(5, 20), "clip_norm": 1.0}
    full_model = make_model()
    full = train.fit(
        full_model, mse, batches, steps=20, seed=7, eval_fn=held_out, eval_every=5, **kwargs
    )

    first = train.fit(make_model(), mse, batches, steps=12, seed=7, checkpoint=ckpt, **kwargs)
    assert first.steps == list(range(12))
    torch.manual_seed(99)  # disturb the RNG: resume must restore it
    resumed_model = make_model(seed=5)  # other initial weights: resume must load them
    resumed = train.fit(
        resumed_model, mse, batches, steps=20, resume=ckpt, eval_fn=held_out, eval_every=5, **kwargs
    )
    assert resumed.steps == list(range(20))  # the history continues
    assert resumed.loss == full.loss  # bitwise, dropout and AdamW state included
    assert resumed.grad_norm == full.grad_norm
    for p, q in zip(full_model.parameters(), resumed_model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert [e["step"] for e in resumed.evals] == [15, 20]


def test_history_last_eval_without_eval() -> None:
    hist = train.fit(make_model(), mse, batches, steps=2)
    with pytest.raises(ValueError, match="no evaluation was run"):
        hist.last_eval()


def test_progress_bar_runs(capsys: pytest.CaptureFixture[str]) -> None:
    train.fit(make_model(), mse, batches, steps=3)
    assert capsys.readouterr().err == ""  # silent by default
    train.fit(make_model(), mse, batches, steps=3, progress=True)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"steps": 0}, ValueError, "steps must be >= 1"),
        ({"steps": 2.5}, TypeError, "steps must be an int"),
        ({"steps": 2, "lr": 0.0}, ValueError, "lr must be > 0"),
        ({"steps": 2, "clip_norm": -1.0}, ValueError, "clip_norm must be > 0"),
        ({"steps": 2, "eval_every": 0}, ValueError, "eval_every must be >= 1"),
        ({"steps": 2, "stop_when": lambda m: True}, ValueError, "stop_when needs eval_fn"),
    ],
)
def test_fit_argument_errors(kwargs, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        train.fit(make_model(), mse, batches, **kwargs)


def test_fit_type_errors() -> None:
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        train.fit(lambda x: x, mse, batches, steps=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="batches must be callable"):
        train.fit(make_model(), mse, [1, 2], steps=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="loss_fn must return a scalar tensor, got \\(7, 3\\)"):
        train.fit(make_model(), lambda m, b: m(b[0]) - b[1], batches, steps=1)
    with pytest.raises(TypeError, match="eval_fn must return a dict"):
        train.fit(make_model(), mse, batches, steps=1, eval_fn=lambda m: 0.5)  # type: ignore[arg-type, return-value]


def test_default_optimizer_is_the_contract_adamw(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt.pt"
    train.fit(make_model(), mse, batches, steps=1, lr=3e-3, checkpoint=ckpt)
    group = torch.load(ckpt, weights_only=True)["optimizer"]["param_groups"][0]
    assert group["betas"] == (0.9, 0.98) and group["weight_decay"] == 0.0
    assert group["initial_lr"] == 3e-3 and "amsgrad" in group  # an Adam-family group
