"""A tiny T5: several tasks in one text-to-text model, and span-corruption pretraining (chapter 14).

Everything is offline: the corpus is Python's own documentation (``pydoc_data.topics``) cut into
lower-cased words, and the tasks are generated here. Two experiments, each with a checkpoint:

1. **Text-to-text.** One T5 (``T5Config.tiny``) learns three tasks at once, told apart only by a
   prefix word: ``reverse:`` (digits backwards), ``sort:`` (digits in order) and ``words:`` (a
   number below 10,000 in English words). Held-out inputs: digit strings and numbers that training
   never shows (a fixed hash splits them). The control is the same model size trained on ONE task
   with the same optimizer steps and the same examples of that task per step (32), only without
   the other tasks' examples beside them (not the same updates: AdamW normalises the summed
   gradient, so in the shared model each task gets a share of every step). A second control
   trains the multi-task model twice as long (:data:`LONG_STEPS`): is a gap capacity or time?
2. **Does denoising pretraining help?** Pretrain with T5's span corruption on the corpus (the
   downstream task's held-out sentences removed from it), then fine-tune on a small downstream
   task on corpus sentences: ``fill:``, a sentence with one word replaced by ``<mask>`` -> that
   word (a cloze test; its format differs from pretraining's: another prefix, a mask token
   rather than a sentinel, the bare word as the answer). The control is the same fine-tuning
   from a random initialisation. Held-out loss, top-5 and exact accuracy are recorded every 25
   fine-tuning steps, beside the majority answer's accuracy and the pretrained model's
   zero-shot accuracy (the same cloze in its pretraining format).

Run ``python -m mtlib.experiments.t5_pretrain`` to train seeds 0 to 4 of every run, evaluate
them and rewrite both checkpoints (:data:`MULTITASK_CHECKPOINT`, :data:`PRETRAIN_CHECKPOINT`);
``--only multitask`` or ``--only pretrain`` redoes one experiment. Weights are rounded to float16
before evaluation and stored so (the checkpoints stay under 2 MB, and the reported numbers are
those of the stored weights).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from mtlib import train, utils
from mtlib.data.corpus import pydoc_topics
from mtlib.data.translation import WORDS, number_to_words
from mtlib.denoising import span_corruption
from mtlib.models.bart import BART, BARTConfig
from mtlib.models.t5 import T5, T5Config
from mtlib.utils import seed_everything

__all__ = [
    "DIGIT_LENGTHS",
    "HELDOUT_SEED",
    "MASKS_PER_SENTENCE",
    "MULTITASK_CHECKPOINT",
    "PRETRAIN_CHECKPOINT",
    "SPECIAL_IDS",
    "TASKS",
    "Batch",
    "Settings",
    "Vocab",
    "bart_config",
    "check_special_ids",
    "corpus_text",
    "downstream_sentences",
    "evaluate_task",
    "finetune_settings",
    "fill_batch",
    "fill_metrics",
    "majority_baseline",
    "unigram_baseline",
    "LONG_STEPS",
    "zero_shot_fill",
    "heldout_fill_batch",
    "mask_word",
    "load_multitask",
    "load_pretrain",
    "make_batch",
    "model_config",
    "multitask_settings",
    "pretrain_settings",
    "pretraining_stream",
    "span_batch",
    "task_batch",
    "task_examples",
    "task_stream",
    "fill_stream",
    "span_stream",
    "new_model",
    "new_bart",
    "run_multitask",
    "run_pretrain",
    "run_finetune",
    "generate",
    "exact_match",
    "heldout_task_batch",
    "loss_fn",
    "train_run",
    "vocab",
    "words_of",
]

#: The folder of the checkpoints (inside the package, so that they install with mtlib).
HERE = Path(str(resources.files("mtlib.experiments")))
#: The text-to-text experiment's checkpoint (seed 0's multi-task model and the report of all runs).
MULTITASK_CHECKPOINT = HERE / "t5_multitask_checkpoint.pt"
#: The pretraining experiment's checkpoint (seed 0's pretrained and fine-tuned models, the report).
PRETRAIN_CHECKPOINT = HERE / "t5_pretrain_checkpoint.pt"

#: The text-to-text tasks, each named by its prefix.
TASKS = ("reverse", "sort", "words")
#: Sentinels ``<extra_id_0>`` to ``<extra_id_15>``, at the END of the vocabulary as in T5.
NUM_SENTINELS = 16
#: How many of the most frequent corpus words the vocabulary holds (the rest are ``<unk>``).
CORPUS_WORDS = 2000
#: Held-out questions of the fill task per held-out sentence (3 different words).
MASKS_PER_SENTENCE = 3
#: Seed of the fixed held-out samples that every report uses.
HELDOUT_SEED = 2020
#: The multi-task run's second control is the same run, twice as long (this many optimizer steps).
LONG_STEPS = 1200
#: Fewest and most digits (both included) of a ``reverse:`` / ``sort:`` input by default.
DIGIT_LENGTHS = (3, 7)
#: The special ids of :class:`Vocab` that :func:`make_batch` and :func:`generate` rely on.
SPECIAL_IDS = {"pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}


# --------------------------------------------------------------------------------------------
# Words, vocabulary, corpus
# --------------------------------------------------------------------------------------------


def words_of(text: str) -> list[str]:
    """Lower-cased words, numbers and single punctuation marks: ``"Call f(x)."`` -> 6 tokens."""
    return re.findall(r"[a-z]+|[0-9]+|[^\sa-z0-9]", text.lower())


@cache
def corpus_text() -> str:
    """Python's documentation topics (:func:`mtlib.data.corpus.pydoc_topics`) joined, whitespace
    collapsed."""
    topics = pydoc_topics()

    return re.sub(r"\s+", " ", "\n".join(topics[key] for key in sorted(topics)))


@dataclass(frozen=True)
class Vocab:
    """Word-level vocabulary: ``<pad>`` 0 (also T5's decoder start), ``</s>`` 1, ``<unk>`` 2, ...

    The task prefixes, the digits, the number words and the most frequent corpus words follow;
    the sentinels come last, numbered down from the end as in T5 (``<extra_id_0>`` is the last id).
    """

    itos: tuple[str, ...]

    @property
    def size(self) -> int:
        """Number of tokens."""
        return len(self.itos)

    @property
    def stoi(self) -> dict[str, int]:
        """Token -> id."""
        return _stoi(self.itos)

    @property
    def sentinels(self) -> list[int]:
        """Sentinel ids in order of use (``<extra_id_0>``, ``<extra_id_1>``, ...)."""
        return [self.size - 1 - k for k in range(NUM_SENTINELS)]

    def encode(self, words: Sequence[str]) -> list[int]:
        """Words -> ids (unknown words -> ``<unk>``)."""
        stoi = self.stoi
        return [stoi.get(w, 2) for w in words]

    def decode(self, ids: Sequence[int] | Tensor, *, stop_at_eos: bool = True) -> str:
        """Ids -> text; pads dropped, stops at the first ``</s>`` unless told otherwise."""
        out = []
        for i in ids.tolist() if isinstance(ids, Tensor) else ids:
            if i == 1 and stop_at_eos:
                break
            if i != 0:
                out.append(self.itos[i])
        return " ".join(out)


@cache
def _stoi(itos: tuple[str, ...]) -> dict[str, int]:
    return {s: i for i, s in enumerate(itos)}


@cache
def vocab() -> Vocab:
    """The experiments' vocabulary (about 2,060 tokens)."""
    counts = Counter(words_of(corpus_text()))
    fixed = ["<pad>", "</s>", "<unk>", "<mask>"] + [f"{t}:" for t in (*TASKS, "fill")]
    fixed += [str(d) for d in range(10)] + WORDS
    corpus = [w for w, _ in counts.most_common() if w not in fixed][:CORPUS_WORDS]
    sentinels = [f"<extra_id_{k}>" for k in reversed(range(NUM_SENTINELS))]
    return Vocab(tuple(fixed + corpus + sentinels))


def model_config(**overrides: Any) -> T5Config:
    """The experiments' model: ``T5Config.tiny`` for this vocabulary, no dropout."""
    return T5Config.tiny(**{"vocab_size": vocab().size, "dropout": 0.0, **overrides})


def bart_config(**overrides: Any) -> BARTConfig:
    """A BART of the T5's size for this vocabulary: ``BARTConfig.tiny`` with the book's ids.

    2 + 2 layers, d_model 64, 4 heads, d_ff 128, no dropout, 128 positions (every input and
    target of the tasks fits, a 12-digit ``reverse:`` input included). ``BARTConfig``'s own
    special ids (pad 1, ``</s>`` 2, decoder start 2) would collide with this vocabulary, where 1
    is ``</s>`` and 2 is ``<unk>``: here pad and decoder start are 0 and ``</s>`` is 1, as
    :func:`make_batch` builds the batches (:data:`SPECIAL_IDS`; ``bos_token_id`` 0 is unused).
    """
    return BARTConfig.tiny(**{"vocab_size": vocab().size, "dropout": 0.0, "bos_token_id": 0,
                              **SPECIAL_IDS, **overrides})  # fmt: skip


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """Padded encoder inputs, their mask (1 = token), decoder inputs and labels (0 = pad)."""

    input_ids: Tensor  # (B, S)
    attention_mask: Tensor  # (B, S)
    decoder_input_ids: Tensor  # (B, T) start token 0, then the labels shifted right
    labels: Tensor  # (B, T) target ids then </s>, padded with 0


def make_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> Batch:
    """Pad ``(source ids, target ids)`` pairs; ``</s>`` (1) is appended to both."""
    sources = [list(s) + [1] for s, _ in pairs]
    targets = [list(t) + [1] for _, t in pairs]
    s_len, t_len = max(map(len, sources)), max(map(len, targets))
    input_ids = torch.tensor([s + [0] * (s_len - len(s)) for s in sources])  # (B, S)
    labels = torch.tensor([t + [0] * (t_len - len(t)) for t in targets])  # (B, T)
    decoder_input_ids = torch.cat(
        [torch.zeros_like(labels[:, :1]), labels[:, :-1]], dim=1
    )  # (B, T)
    return Batch(input_ids, (input_ids != 0).long(), decoder_input_ids, labels)


def loss_fn(model: torch.nn.Module, batch: Batch) -> Tensor:
    """Mean cross-entropy over the target tokens (pads ignored)."""
    logits = model(batch.input_ids, batch.decoder_input_ids, batch.attention_mask)  # (B, T, V)
    return train.sequence_loss(logits, batch.labels, pad_id=0)


def _heldout_key(key: str) -> bool:
    """A fixed tenth of all inputs is held out, by a hash of the input's text."""
    return hashlib.sha256(key.encode()).digest()[0] % 10 == 0


def task_examples(
    task: str,
    n: int,
    *,
    split: str,
    generator: torch.Generator,
    lengths: tuple[int, int] = DIGIT_LENGTHS,
) -> list[tuple[list[str], list[str]]]:
    """``n`` (source words, target words) pairs of a task, from the training or held-out split.

    ``reverse`` and ``sort``: ``lengths`` = (fewest, most) digits, both included, each length
    equally likely (default 3 to 7, what the models were trained on); ``words``: a number from
    0 to 9,999 (``lengths`` is not used). Numbers below 100 are always in training (they are
    the task's dictionary).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    low, high = lengths
    if isinstance(low, bool) or isinstance(high, bool) or not 1 <= low <= high:
        raise ValueError(
            f"lengths must be (fewest, most) digits with 1 <= fewest <= most, got {lengths!r}"
        )
    out: list[tuple[list[str], list[str]]] = []
    while len(out) < n:
        if task == "words":
            number = int(torch.randint(0, 10_000, (1,), generator=generator))
            digits = list(str(number))
            held = number >= 100 and _heldout_key(f"words:{number}")
            target = number_to_words(number)
        else:
            length = int(torch.randint(low, high + 1, (1,), generator=generator))
            digits = [str(d) for d in torch.randint(0, 10, (length,), generator=generator).tolist()]
            held = _heldout_key(f"digits:{''.join(digits)}")
            target = digits[::-1] if task == "reverse" else sorted(digits)
        if held == (split == "heldout"):
            out.append(([f"{task}:", *digits], target))
    return out


def task_batch(
    tasks: Sequence[str],
    per_task: int,
    *,
    split: str,
    generator: torch.Generator,
    lengths: tuple[int, int] = DIGIT_LENGTHS,
) -> Batch:
    """A batch of ``per_task`` examples of each task in ``tasks`` (in that order); ``lengths``
    as in :func:`task_examples`."""
    v = vocab()
    pairs = [(v.encode(s), v.encode(t)) for task in tasks
             for s, t in task_examples(task, per_task, split=split, generator=generator,
                                       lengths=lengths)]  # fmt: skip
    return make_batch(pairs)


# --------------------------------------------------------------------------------------------
# The corpus for pretraining and the downstream task
# --------------------------------------------------------------------------------------------


@cache
def downstream_sentences() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fill task's sentences: (training, held-out), 241 and 107.

    Prose sentences of the corpus (a capital letter, then letters, spaces, commas, quotes,
    parentheses and underscores, then a full stop), 5 to 20 tokens, no unknown word, each once;
    a fixed hash sends one in three to the held-out split.
    """
    known = set(vocab().itos)
    prose = re.compile(r"[A-Z][A-Za-z ,\"()_']+[a-z\")]\.")
    sentences = sorted({s for s in re.split(r"(?<=[.!?]) ", corpus_text())
                        if prose.fullmatch(s) and 5 <= len(words_of(s)) <= 20
                        and all(w in known for w in words_of(s))})  # fmt: skip
    train_s = tuple(s for s in sentences if hashlib.sha256(s.encode()).digest()[1] % 3 != 0)
    held_s = tuple(s for s in sentences if hashlib.sha256(s.encode()).digest()[1] % 3 == 0)
    return train_s, held_s


def mask_word(
    words: Sequence[str], *, generator: torch.Generator, avoid: Sequence[int] = ()
) -> tuple[list[str], str, int]:
    """The downstream example: ``words`` with one word (letters only) replaced by ``<mask>``.

    Returns:
        ``(masked words, the word, its position)``; positions in ``avoid`` are not chosen
        when another word is left.
    """
    candidates = [i for i, w in enumerate(words) if w.isalpha()]
    fresh = [i for i in candidates if i not in avoid] or candidates
    i = fresh[int(torch.randint(0, len(fresh), (1,), generator=generator))]
    return [*words[:i], "<mask>", *words[i + 1 :]], words[i], i


@cache
def pretraining_stream() -> Tensor:
    """The corpus as one long id sequence, the downstream held-out sentences removed: (N,)."""
    text = corpus_text()
    for sentence in downstream_sentences()[1]:
        text = text.replace(sentence, " ")
    return torch.tensor(vocab().encode(words_of(text)))


def span_batch(batch_size: int, *, window: int = 32, generator: torch.Generator) -> Batch:
    """Span corruption of ``batch_size`` random ``window``-word pieces of the corpus."""
    stream, v = pretraining_stream(), vocab()
    starts = torch.randint(0, stream.numel() - window, (batch_size,), generator=generator)
    pairs = []
    for start in starts.tolist():
        inputs, targets = span_corruption(stream[start : start + window], noise_density=0.15,
                                          mean_span_length=3.0, sentinel_ids=v.sentinels,
                                          generator=generator)  # fmt: skip
        pairs.append((inputs.tolist(), targets.tolist()))
    return make_batch(pairs)


def fill_batch(sentences: Sequence[str], *, generator: torch.Generator) -> Batch:
    """``fill: <sentence with one word masked>`` -> that word; a repeated sentence gets another word."""
    v = vocab()
    pairs: list[tuple[list[int], list[int]]] = []
    used: dict[str, list[int]] = {}
    for sentence in sentences:
        masked, word, i = mask_word(
            words_of(sentence), generator=generator, avoid=used.get(sentence, [])
        )
        used.setdefault(sentence, []).append(i)
        pairs.append((v.encode(["fill:", *masked]), v.encode([word])))
    return make_batch(pairs)


def heldout_fill_batch() -> Batch:
    """The fixed held-out examples: :data:`MASKS_PER_SENTENCE` words of each held-out sentence."""
    sentences = [s for s in downstream_sentences()[1] for _ in range(MASKS_PER_SENTENCE)]
    return fill_batch(sentences, generator=utils.fixed_generator(HELDOUT_SEED))


# --------------------------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------------------------


@dataclass
class Settings:
    """One training run: steps, batch, peak learning rate, warm-up (then cosine to 0)."""

    steps: int = 600  # optimizer steps
    batch_size: int = 96  # examples per step
    lr: float = 3e-3  # peak learning rate (AdamW)
    warmup: int = 50  # linear warm-up steps
    clip_norm: float = 1.0  # global gradient-norm clipping


def multitask_settings(**overrides: Any) -> Settings:
    """The multi-task run: 600 steps of 96 examples (32 per task)."""
    return Settings(**{**asdict(Settings()), **overrides})


def pretrain_settings(**overrides: Any) -> Settings:
    """Span-corruption pretraining: 600 steps of 64 windows of 32 words."""
    return Settings(**{**asdict(Settings(steps=600, batch_size=64)), **overrides})


def finetune_settings(**overrides: Any) -> Settings:
    """Fine-tuning on the fill task: 300 steps of 32 training sentences."""
    return Settings(
        **{**asdict(Settings(steps=300, batch_size=32, lr=1e-3, warmup=30)), **overrides}
    )


def check_special_ids(model: torch.nn.Module) -> None:
    """Refuse a model whose ``config`` disagrees with the batches' special ids.

    :func:`make_batch` pads with 0, ends every sequence with ``</s>`` = 1 and starts every
    decoder from 0 (:data:`SPECIAL_IDS`); a model that pads, stops or starts with other ids
    would train without complaint and then never start or stop correctly in ``generate``.

    Raises:
        ValueError: naming each id that differs (e.g. ``BARTConfig.tiny``'s defaults).
    """
    config = getattr(model, "config", None)
    wrong = [f"{name}={getattr(config, name)} (the batches use {want})"
             for name, want in SPECIAL_IDS.items()
             if hasattr(config, name) and getattr(config, name) != want]  # fmt: skip
    if wrong:
        raise ValueError(
            f"the model's special ids disagree with the book's vocabulary (<pad> 0, </s> 1, "
            f"decoder start 0): {', '.join(wrong)}; build it with these ids "
            f"(for BART: tp.bart_config() or tp.new_bart(seed))"
        )


def train_run(
    model: torch.nn.Module,
    batches: Callable[[int], Batch],
    settings: Settings,
    *,
    seed: int,
    steps: int | None = None,
    eval_fn: Callable[[torch.nn.Module], dict[str, float]] | None = None,
    eval_every: int = 25,
) -> train.History:
    """Train ``model`` in place with AdamW, warm-up + cosine decay and clipping.

    ``model`` is a :class:`~mtlib.models.t5.T5` or :class:`~mtlib.models.bart.BART` (anything
    with the same ``forward``); its special ids must be the batches' (:func:`check_special_ids`).
    """
    check_special_ids(model)
    total = settings.steps if steps is None else steps
    return train.fit(model, loss_fn, batches, steps=total, lr=settings.lr, clip_norm=settings.clip_norm,
                     schedule=train.warmup_cosine(settings.warmup, settings.steps), seed=seed,
                     eval_fn=eval_fn, eval_every=eval_every)  # fmt: skip


def _round_to_half(model: T5) -> T5:
    """Round the weights to float16 and back: what the checkpoint stores is what is evaluated."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model.eval()


@torch.no_grad()
def generate(model: T5 | BART, batch: Batch, max_new_tokens: int = 16) -> list[list[int]]:
    """Greedy outputs, each cut at its first ``</s>`` (the model's ``config.eos_token_id``,
    excluded)."""
    model.eval()
    eos = model.config.eos_token_id
    out = model.generate(
        batch.input_ids, max_new_tokens, attention_mask=batch.attention_mask
    )  # (B, 1+n)
    rows = []
    for row in out[:, 1:].tolist():
        rows.append(row[: row.index(eos)] if eos in row else row)
    return rows


def exact_match(model: T5 | BART, batch: Batch) -> float:
    """Share of examples whose whole greedy output equals the target."""
    got = generate(model, batch, max_new_tokens=batch.labels.shape[1] + 2)
    want = [[t for t in row if t not in (0, 1)] for row in batch.labels.tolist()]
    return sum(g == w for g, w in zip(got, want, strict=True)) / len(want)


def heldout_task_batch(
    task: str, n: int = 300, *, lengths: tuple[int, int] = DIGIT_LENGTHS
) -> Batch:
    """The fixed held-out sample of a task that every report uses (``lengths`` as in
    :func:`task_examples`: other lengths give another fixed sample)."""
    return task_batch(
        [task], n, split="heldout", generator=utils.fixed_generator(HELDOUT_SEED), lengths=lengths
    )


def evaluate_task(model: T5 | BART, task: str, n: int = 300) -> float:
    """Held-out exact-match accuracy of ``model`` on ``task`` (``"fill"`` included)."""
    if task == "fill":
        return exact_match(model, heldout_fill_batch())
    return exact_match(model, heldout_task_batch(task, n))


@torch.no_grad()
def fill_metrics(model: torch.nn.Module) -> dict[str, float]:
    """Held-out cloze metrics: loss (nats), top-5 and exact (greedy first token) accuracy."""
    batch = heldout_fill_batch()
    was_training = model.training
    model.eval()
    logits = model(batch.input_ids, batch.decoder_input_ids[:, :1], batch.attention_mask)[
        :, 0
    ]  # (N, V)
    model.train(was_training)
    gold = batch.labels[:, 0]  # (N,)
    top5 = (logits.topk(5, dim=-1).indices == gold[:, None]).any(dim=1)
    return {"loss": F.cross_entropy(logits, gold).item(), "top5": top5.float().mean().item(),
            "exact": (logits.argmax(-1) == gold).float().mean().item()}  # fmt: skip


def majority_baseline() -> float:
    """Held-out accuracy of always answering the training split's most frequent masked word."""
    counts = Counter(w for s in downstream_sentences()[0] for w in words_of(s) if w.isalpha())
    answer = vocab().stoi[counts.most_common(1)[0][0]]
    return (heldout_fill_batch().labels[:, 0] == answer).float().mean().item()


def unigram_baseline(*, source: str = "train", alpha: float = 0.1) -> dict[str, float]:
    """The held-out cloze scored by a context-free word-frequency (unigram) table.

    Every question gets the same distribution: the counts of the alphabetic words of ``source``
    (``"train"``: the fill task's training sentences; ``"corpus"``: the pretraining stream), plus
    ``alpha`` for every vocabulary entry, normalised. It ignores the sentence entirely: a model
    that does not beat it has not used the context.

    Returns:
        ``{"loss", "top5", "exact"}`` as :func:`fill_metrics` reports them.
    """
    if source not in ("train", "corpus"):
        raise ValueError(f"source must be 'train' or 'corpus', got {source!r}")
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    v = vocab()
    if source == "train":
        words = [w for s in downstream_sentences()[0] for w in words_of(s)]
    else:
        words = [v.itos[i] for i in pretraining_stream().tolist()]
    counts = Counter(w for w in words if w.isalpha())
    p = torch.full((v.size,), alpha)  # (V,)
    for w, c in counts.items():
        if w in v.stoi:
            p[v.stoi[w]] += c
    logp = (p / p.sum()).log()  # (V,)
    gold = heldout_fill_batch().labels[:, 0]  # (N,)
    return {"loss": -logp[gold].mean().item(),
            "top5": torch.isin(gold, logp.topk(5).indices).float().mean().item(),
            "exact": (gold == logp.argmax()).float().mean().item()}  # fmt: skip


@torch.no_grad()
def zero_shot_fill(model: T5) -> float:
    """The pretrained model on the held-out cloze in ITS format: ``<extra_id_0>`` for the mask."""
    v = vocab()
    batch = heldout_fill_batch()
    inputs = batch.input_ids[:, 1:].clone()  # (N, S-1) without the prefix
    inputs[inputs == v.stoi["<mask>"]] = v.sentinels[0]
    model.eval()
    out = model.generate(
        inputs, 2, attention_mask=(inputs != 0).long()
    )  # (N, 3) start, sentinel, word
    return (out[:, 2] == batch.labels[:, 0]).float().mean().item()


def task_stream(tasks: Sequence[str], batch_size: int, seed: int) -> Callable[[int], Batch]:
    """``step -> batch`` of training examples of ``tasks``, deterministic given seed and step."""

    def batches(step: int) -> Batch:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
        return task_batch(tasks, batch_size // len(tasks), split="train", generator=generator)

    return batches


def fill_stream(batch_size: int, seed: int) -> Callable[[int], Batch]:
    """``step -> batch`` of fill questions on the training sentences."""
    sentences = downstream_sentences()[0]

    def batches(step: int) -> Batch:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
        idx = torch.randint(0, len(sentences), (batch_size,), generator=generator).tolist()
        return fill_batch([sentences[i] for i in idx], generator=generator)

    return batches


def span_stream(batch_size: int, seed: int) -> Callable[[int], Batch]:
    """``step -> batch`` of span-corrupted corpus windows."""

    def batches(step: int) -> Batch:
        return span_batch(
            batch_size, generator=torch.Generator().manual_seed(seed * 1_000_003 + step)
        )

    return batches


def new_model(seed: int) -> T5:
    """A freshly initialised model of :func:`model_config`, seeded."""
    seed_everything(seed)
    return T5(model_config())


def new_bart(seed: int, **overrides: Any) -> BART:
    """A freshly initialised BART of :func:`bart_config` (``overrides`` passed on), seeded."""
    seed_everything(seed)
    return BART(bart_config(**overrides))


def run_multitask(
    seed: int,
    *,
    tasks: Sequence[str] = TASKS,
    steps: int | None = None,
    total_steps: int | None = None,
) -> tuple[T5, train.History]:
    """Train one model on ``tasks``, 32 examples of each per step, for the multi-task run's steps.

    One task alone thus gets the same number of optimizer steps and the same examples of its
    task as the multi-task model (not the same updates: AdamW normalises the summed gradient).
    ``steps`` stops the run early (the schedule stays the full run's): to retrace its start.
    ``total_steps`` replaces the run's length, schedule included (the long control).
    """
    settings = multitask_settings(
        batch_size=multitask_settings().batch_size * len(tasks) // len(TASKS),
        **({} if total_steps is None else {"steps": total_steps}),
    )
    model = new_model(seed)
    history = train_run(
        model, task_stream(tasks, settings.batch_size, seed), settings, seed=seed, steps=steps
    )
    return _round_to_half(model), history


def run_pretrain(seed: int, *, steps: int | None = None) -> tuple[T5, train.History]:
    """Span-corruption pretraining from a random initialisation."""
    settings = pretrain_settings()
    model = new_model(seed)
    history = train_run(
        model, span_stream(settings.batch_size, seed), settings, seed=seed, steps=steps
    )
    return _round_to_half(model), history


def run_finetune(model: T5, seed: int, *, steps: int | None = None) -> tuple[T5, train.History]:
    """Fine-tune ``model`` (in place) on the fill task's training sentences for ``steps``."""
    settings = finetune_settings(**({} if steps is None else {"steps": steps}))
    history = train_run(
        model, fill_stream(settings.batch_size, seed), settings, seed=seed, eval_fn=fill_metrics
    )
    return _round_to_half(model), history


# --------------------------------------------------------------------------------------------
# Checkpoints and the script
# --------------------------------------------------------------------------------------------


def _save(path: Path, models: dict[str, T5], report: dict[str, Any]) -> None:
    state = {name: {k: v.half() for k, v in m.state_dict().items()} for name, m in models.items()}
    torch.save({"models": state, "config": asdict(model_config()), "report": report}, path)


def _load(path: Path) -> tuple[dict[str, T5], dict[str, Any]]:
    saved = torch.load(path, map_location="cpu", weights_only=True)
    models = {}
    for name, state in saved["models"].items():
        model = T5(T5Config(**saved["config"]))
        model.load_state_dict({k: v.float() for k, v in state.items()})
        models[name] = model.eval()
    return models, saved["report"]


def load_multitask(path: Path | str = MULTITASK_CHECKPOINT) -> tuple[T5, dict[str, Any]]:
    """Seed 0's multi-task model and the report of every run."""
    models, report = _load(Path(path))
    return models["multitask"], report


def load_pretrain(path: Path | str = PRETRAIN_CHECKPOINT) -> tuple[dict[str, T5], dict[str, Any]]:
    """Seed 0's models ``{"pretrained", "finetuned"}`` and the report of every run."""
    return _load(Path(path))


def _multitask_experiment(seeds: Sequence[int], out: Path) -> None:
    report: dict[str, Any] = {
        "settings": asdict(multitask_settings()),
        "heldout_n": 300,
        "long_steps": LONG_STEPS,
        "runs": {},
    }
    keep: dict[str, T5] = {}
    for seed in seeds:
        for kind in ("multitask", *TASKS, "multitask_long"):
            start = time.time()
            tasks = TASKS if kind.startswith("multitask") else (kind,)
            long = LONG_STEPS if kind == "multitask_long" else None
            model, history = run_multitask(seed, tasks=tasks, total_steps=long)
            accuracy = {task: evaluate_task(model, task) for task in tasks}
            report["runs"][f"{kind}/{seed}"] = {"accuracy": accuracy, "loss": history.loss[:50],
                                               "final_loss": sum(history.loss[-20:]) / 20,
                                               "seconds": time.time() - start}  # fmt: skip
            print(
                kind,
                seed,
                {k: round(v, 3) for k, v in accuracy.items()},
                f"{time.time() - start:.0f} s",
            )
            if kind == "multitask" and seed == seeds[0]:
                keep["multitask"] = model
    _save(out, keep, report)


def _pretrain_experiment(seeds: Sequence[int], out: Path) -> None:
    report: dict[str, Any] = {"pretrain": asdict(pretrain_settings()), "finetune": asdict(finetune_settings()),
                              "majority": majority_baseline(), "unigram": unigram_baseline(),
                              "unigram_corpus": unigram_baseline(source="corpus"), "heldout_n": len(heldout_fill_batch().labels),
                              "runs": {}}  # fmt: skip
    keep: dict[str, T5] = {}
    for seed in seeds:
        start = time.time()
        pretrained, history = run_pretrain(seed)
        report["runs"][f"pretrain/{seed}"] = {
            "loss": history.loss,
            "zero_shot": zero_shot_fill(pretrained),
        }
        if seed == seeds[0]:
            keep["pretrained"] = T5(model_config())
            keep["pretrained"].load_state_dict(pretrained.state_dict())
        finetuned, history = run_finetune(pretrained, seed)
        if seed == seeds[0]:
            keep["finetuned"] = finetuned
        report["runs"][f"pretrained/{seed}"] = {"evals": history.evals, "loss": history.loss}
        scratch, history = run_finetune(new_model(seed), seed)
        report["runs"][f"scratch/{seed}"] = {"evals": history.evals, "loss": history.loss}
        for kind in ("pretrained", "scratch"):
            evals = report["runs"][f"{kind}/{seed}"]["evals"]
            print(
                seed,
                kind,
                [(e["step"], round(e["loss"], 2), round(e["top5"], 3)) for e in evals[::4]],
            )
        print(
            f"seed {seed}: {time.time() - start:.0f} s, zero-shot {report['runs'][f'pretrain/{seed}']['zero_shot']:.3f}"
        )
    _save(out, keep, report)


def main(argv: Sequence[str] | None = None) -> None:
    """Train every run of both experiments (or one) and rewrite the checkpoints."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--only", choices=["multitask", "pretrain"], default=None)
    parser.add_argument("--out-multitask", type=Path, default=MULTITASK_CHECKPOINT)
    parser.add_argument("--out-pretrain", type=Path, default=PRETRAIN_CHECKPOINT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.only in (None, "multitask"):
        _multitask_experiment(args.seeds, args.out_multitask)
    if args.only in (None, "pretrain"):
        _pretrain_experiment(args.seeds, args.out_pretrain)


if __name__ == "__main__":
    main()
