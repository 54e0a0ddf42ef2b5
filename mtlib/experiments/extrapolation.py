"""Length extrapolation of positional encodings (chapter 6).

One small causal model per positional scheme is trained on a task that needs relative
positions, at length ``L``, and tested at ``L``, ``1.5 L`` and ``2 L``:

    the task: at every position t >= shift, predict the token that sits ``shift`` positions back
    (``y_t = x_{t - shift}``), the tokens being uniform random symbols.

Because the model is causal, position t never sees what comes after it, so training on
sequences of length L is training on every length up to L at once, and the accuracy at
positions below L is the same whatever the test length: what changes at 1.5 L and 2 L is
only the positions the model has never seen.

The six schemes, all built from :mod:`mtlib` (:class:`~mtlib.attention.MultiHeadAttention`
with ``rotary=`` or ``bias=``):

- ``none``: no positional information at all (the causal mask is the only hint of order);
- ``sinusoidal``: :class:`~mtlib.positional.SinusoidalEncoding` added to the token embeddings;
- ``learned``: :class:`~mtlib.positional.LearnedEncoding`, with a table sized for the longest
  test length: the rows beyond L exist but stay at their random initial values, because no
  training sequence reaches them (what a BERT or GPT-2 table of size L would have to be
  extended with anyway);
- ``t5``: :class:`~mtlib.positional.RelativePositionBias` (causal buckets), shared by the layers;
- ``rope``: :class:`~mtlib.positional.RotaryEmbedding` inside every attention layer;
- ``alibi``: :func:`~mtlib.positional.alibi_bias`, fixed slopes, no parameters.

Run ``python -m mtlib.experiments.extrapolation`` to train every scheme with every seed and
rewrite :mod:`mtlib.experiments.extrapolation_table` (a Python module, so that the table is
installed with mtlib, on Colab too). One model takes a few seconds on one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from mtlib.attention import MultiHeadAttention
from mtlib.positional import (
    LearnedEncoding,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalEncoding,
    alibi_bias,
)

__all__ = [
    "SCHEMES",
    "ExtrapolationConfig",
    "PositionModel",
    "make_batch",
    "train",
    "evaluate",
    "crop_accuracy",
    "run",
    "main",
    "SHIFTS",
]

#: The position schemes the study compares (``"none"`` is the order-blind control).
SCHEMES = ("none", "sinusoidal", "learned", "t5", "rope", "alibi")
TABLE_MODULE = Path(__file__).with_name("extrapolation_table.py")


@dataclass(frozen=True)
class ExtrapolationConfig:
    """Task, model and training sizes of the study (the defaults are the ones in the table)."""

    num_symbols: int = 16  # vocabulary of the random sequences
    shift: int = 3  # predict the token this many positions back
    train_len: int = 32  # L: every training sequence has this length
    test_factors: tuple[float, ...] = (1.0, 1.5, 2.0)  # test lengths, as multiples of L
    d_model: int = 32  # model width
    num_heads: int = 4  # heads per attention layer
    num_layers: int = 2  # pre-LN attention + feed-forward layers
    d_ff: int = 64  # feed-forward hidden width
    steps: int = 500  # Adam steps
    batch_size: int = 32  # sequences per step
    lr: float = 3e-3  # Adam learning rate
    test_size: int = 512  # test sequences per length
    t5_max_distance: int = 128  # T5 bias: distances from here on share the last bucket

    @property
    def max_len(self) -> int:
        """The longest test length (the tables of sinusoidal, learned and RoPE cover it)."""
        return int(max(self.test_factors) * self.train_len)

    def test_lengths(self) -> list[int]:
        """The test lengths, e.g. [32, 48, 64] for L = 32."""
        return [int(f * self.train_len) for f in self.test_factors]


class _Layer(nn.Module):
    """A pre-LN layer: ``x + attn(norm(x))``, then ``x + ff(norm(x))``."""

    def __init__(self, config: ExtrapolationConfig, rotary: RotaryEmbedding | None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.d_model)
        self.attn = MultiHeadAttention(config.d_model, config.num_heads, rotary=rotary)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.ff = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff),
            nn.ReLU(),
            nn.Linear(config.d_ff, config.d_model),
        )

    def forward(self, x: Tensor, bias: Tensor | None, mask: Tensor | None) -> Tensor:
        x = x + self.attn(self.norm1(x), mask=mask, bias=bias, is_causal=True)[0]  # (B, T, d_model)
        return x + self.ff(self.norm2(x))  # (B, T, d_model)


class PositionModel(nn.Module):
    """A small causal Transformer whose only difference between schemes is where positions enter.

    Args:
        scheme: one of :data:`SCHEMES`.
        config: sizes; ``config.max_len`` positions are covered by the tables.

    Shape:
        forward: tokens (B, T) -> logits (B, T, num_symbols).
    """

    def __init__(self, scheme: str, config: ExtrapolationConfig) -> None:
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        self.scheme = scheme
        self.num_heads = config.num_heads
        d, head_dim = config.d_model, config.d_model // config.num_heads
        self.embed = nn.Embedding(config.num_symbols, d)
        self.absolute: SinusoidalEncoding | LearnedEncoding | None = None
        if scheme == "sinusoidal":
            self.absolute = SinusoidalEncoding(d, config.max_len)
        elif scheme == "learned":
            self.absolute = LearnedEncoding(d, config.max_len)  # rows >= L never trained
        self.relative = (
            RelativePositionBias(
                config.num_heads, bidirectional=False, max_distance=config.t5_max_distance
            )
            if scheme == "t5"
            else None
        )
        rotary = RotaryEmbedding(head_dim, max_len=config.max_len) if scheme == "rope" else None
        self.layers = nn.ModuleList(_Layer(config, rotary) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.num_symbols)

    def attention_bias(self, length: int) -> Tensor | None:
        """The additive bias every layer adds to its scores: (1, H, T, T), or None."""
        if self.relative is not None:
            return self.relative(length)  # learned, one scalar per (distance bucket, head)
        if self.scheme == "alibi":
            return alibi_bias(self.num_heads, length, device=self.head.weight.device)
        return None

    def forward(self, tokens: Tensor, *, window: int | None = None) -> Tensor:
        """Logits for every position; ``window`` (a control) hides keys ``window`` or more back."""
        x = self.embed(tokens)  # (B, T, d_model)
        if self.absolute is not None:
            x = self.absolute(x)  # + P[0 .. T-1]
        length = tokens.shape[1]
        bias = self.attention_bias(length)
        mask = None
        if window is not None:
            pos = torch.arange(length, device=tokens.device)
            mask = (pos[:, None] - pos[None, :]) < window  # (T, T): distance < window
        for layer in self.layers:
            x = layer(x, bias, mask)
        return self.head(self.norm(x))  # (B, T, num_symbols)


def make_batch(
    n: int, length: int, config: ExtrapolationConfig, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``n`` random sequences and their targets; targets before position ``shift`` are -100.

    Returns:
        ``(tokens, targets)``, both of shape (n, length), int64; -100 marks "no target"
        (ignored by ``cross_entropy``).
    """
    tokens = torch.randint(config.num_symbols, (n, length), generator=generator)  # (n, T)
    targets = torch.full_like(tokens, -100)
    targets[:, config.shift :] = tokens[:, : length - config.shift]  # y_t = x_{t - shift}
    return tokens, targets


def train(
    scheme: str,
    seed: int,
    config: ExtrapolationConfig,
    *,
    callback: Callable[[int, PositionModel], None] | None = None,
) -> PositionModel:
    """Train one model with Adam on fresh batches of length L; deterministic given the seed.

    ``callback(step, model)``, if given, is called after every step (1 .. ``config.steps``), in
    training mode. The first n steps do not depend on ``config.steps``, so step 500 of a
    1000-step run is the 500-step model of the table.
    """
    torch.manual_seed(seed)
    model = PositionModel(scheme, config)
    data = torch.Generator().manual_seed(1000 + seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    model.train()
    for step in range(config.steps):
        tokens, targets = make_batch(config.batch_size, config.train_len, config, data)
        logits = model(tokens)  # (B, L, num_symbols)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if callback is not None:
            callback(step + 1, model)
    return model.eval()


@torch.no_grad()
def evaluate(
    model: PositionModel, config: ExtrapolationConfig, seed: int = 0, *, window: int | None = None
) -> dict[str, float]:
    """Per-token accuracy at every test length, and on the unseen positions L..2L-1 alone.

    ``window`` (a control, not used for the table) lets each query see only the keys fewer
    than ``window`` positions back, so that no distance exceeds what training saw.

    Returns:
        ``{"L=32": acc, "L=48": acc, "L=64": acc, "unseen": acc}`` (fractions in [0, 1]); the
        test sequences depend only on ``seed``, so every scheme sees the same ones.
    """
    data = torch.Generator().manual_seed(seed)
    result: dict[str, float] = {}
    for length in config.test_lengths():
        tokens, targets = make_batch(config.test_size, length, config, data)
        correct = (model(tokens, window=window).argmax(-1) == targets)[
            :, config.shift :
        ]  # (n, T - shift)
        result[f"L={length}"] = correct.float().mean().item()
        if length == config.max_len:
            result["unseen"] = correct[:, config.train_len - config.shift :].float().mean().item()
    return result


@torch.no_grad()
def crop_accuracy(model: PositionModel, config: ExtrapolationConfig, seed: int = 0) -> float:
    """Accuracy on the unseen positions L..2L-1 when each query is given only its last L tokens.

    A control stricter than ``window`` (not used for the table): the prediction at position
    ``t >= L`` is made from the tokens ``t-L+1 .. t`` alone, fed as a fresh sequence of length L
    (sliding-window evaluation), so nothing in any layer differs from position L-1 in training.
    ``window`` caps the distance in each layer, but in a two-layer model the second layer then
    attends to keys that all summarise a full window of L tokens, a mix training never produced.
    For absolute schemes the crop also renumbers the positions 0..L-1, so it repairs them too.

    Returns:
        The fraction of correct predictions; the test sequences are :func:`evaluate`'s longest.
    """
    data = torch.Generator().manual_seed(seed)
    for length in config.test_lengths():  # draw the batches in evaluate's order: the same data
        tokens, targets = make_batch(config.test_size, length, config, data)
    L = config.train_len
    correct = [
        model(tokens[:, t - L + 1 : t + 1])[:, -1].argmax(-1) == targets[:, t]  # (n,)
        for t in range(L, tokens.shape[1])
    ]
    return torch.stack(correct).float().mean().item()


def run(
    schemes: tuple[str, ...] = SCHEMES,
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    config: ExtrapolationConfig | None = None,
) -> dict[str, dict[int, dict[str, float]]]:
    """Train and evaluate every (scheme, seed): ``{scheme: {seed: metrics}}``.

    The metrics are :func:`evaluate`'s, plus ``"window"``: the accuracy on the unseen positions
    when every query sees only the keys fewer than L positions back (no unseen distances).
    """
    config = ExtrapolationConfig() if config is None else config
    results: dict[str, dict[int, dict[str, float]]] = {}
    for scheme in schemes:
        results[scheme] = {}
        for seed in seeds:
            model = train(scheme, seed, config)
            result = evaluate(model, config)
            # the control: the same model, each query seeing only keys < L positions back
            result["window"] = evaluate(model, config, window=config.train_len)["unseen"]
            results[scheme][seed] = result
    return results


SHIFTS = (1, 3)  # the two tasks of the table: the previous token, and three back


def _write_table(
    results: dict[int, dict[str, dict[int, dict[str, float]]]],
    config: ExtrapolationConfig,
    seconds: float,
) -> None:
    table = {
        f"shift={shift}": {
            scheme: {str(seed): {m: round(v, 4) for m, v in r.items()} for seed, r in per.items()}
            for scheme, per in by_scheme.items()
        }
        for shift, by_scheme in results.items()
    }
    settings = {k: v for k, v in asdict(config).items() if k != "shift"}
    text = (
        '"""Results of ``python -m mtlib.experiments.extrapolation`` (generated: do not edit).\n\n'
        "RESULTS[task][scheme][seed][metric] is a per-token accuracy, task = 'shift=1' or\n"
        "'shift=3'; CONFIG is ExtrapolationConfig's fields (shift aside); SECONDS the wall time.\n"
        '"""\n\n'
        f"CONFIG = {json.dumps(settings)}\n\n"
        f"SECONDS = {seconds:.0f}  # the whole run, one thread\n\n"
        f"RESULTS = {json.dumps(table, indent=1)}\n"
    )
    TABLE_MODULE.write_text(text)


def main(argv: list[str] | None = None) -> None:
    """Command line: train everything, print the table, rewrite the table module."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0, 1, ...)")
    parser.add_argument("--no-write", action="store_true", help="print only; keep the table")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small models: one thread is fastest, and bit-reproducible
    start = time.perf_counter()
    results: dict[int, dict[str, dict[int, dict[str, float]]]] = {}
    for shift in SHIFTS:
        config = ExtrapolationConfig(shift=shift)
        results[shift] = {}
        for scheme in SCHEMES:
            per_seed = run((scheme,), tuple(range(args.seeds)), config)[scheme]
            results[shift][scheme] = per_seed
            cells = []
            for metric in per_seed[0]:
                values = [r[metric] for r in per_seed.values()]
                cells.append(
                    f"{metric} {statistics.mean(values):.3f} [{min(values):.3f}, {max(values):.3f}]"
                )
            elapsed = time.perf_counter() - start
            print(f"shift={shift} {scheme:<11}", "  ".join(cells), f"({elapsed:.0f} s)", flush=True)
    seconds = time.perf_counter() - start
    if not args.no_write:
        _write_table(results, ExtrapolationConfig(), seconds)
        print(f"wrote {TABLE_MODULE.name} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
