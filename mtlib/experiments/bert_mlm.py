"""A small BERT pretrained by masked language modelling, fine-tuned and distilled (chapter 9).

Everything is offline: the corpus is Python's own documentation (``pydoc_data.topics``, the
copy in :mod:`mtlib.data.corpus`), the
tokenizer is chapter 2's byte-level BPE, and the fine-tuning task is generated here. This
module holds what chapter 9 trains and measures, so that the notebook shows the experiments
and not the plumbing:

- :func:`corpus`, :class:`Vocab`, :func:`mlm_windows`: the text split by topic (one topic in
  ten held out), BPE plus the four special tokens, 32-token windows ``[CLS] ... [SEP]``;
- :func:`model_config`, :class:`PretrainSettings`, :func:`pretrain`: a 4-layer BERT at
  d_model 64 trained on the 80/10/10 masked-LM objective (:func:`~mtlib.models.bert.mask_tokens`);
- :func:`mlm_accuracy`, :func:`ngram_baselines`, :func:`fill_mask`: held-out accuracy at
  masked positions beside the unigram, bigram and trigram count baselines, and top-k
  predictions for a ``[MASK]``;
- :func:`phrases`, :func:`finetune`, :class:`BagOfEmbeddings`: a sentiment task where word
  order and negation matter ("good, not bad" vs "bad, not good"), with held-out compositions;
- :func:`distill`: a 2-layer student trained on the teacher's softened outputs;
- a checkpoint (:data:`CHECKPOINT`, the seed-0 pretrained model, its tokenizer and the report
  of all seeds) written by this script and loaded by the chapter and a test.

Run ``python -m mtlib.experiments.bert_mlm`` to pretrain seeds 0, 1 and 2, evaluate them and
rewrite the checkpoint (about 12 minutes on one CPU thread, plus about 8 for the fine-tuning
table: seeds 0-5 with its controls); ``--finetune-only`` keeps the pretrained model and redoes
only the fine-tuning table.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import train
from mtlib.blocks import EncoderBlock
from mtlib.data.bpe import BPETokenizer, pretokenize
from mtlib.data.corpus import pydoc_topics
from mtlib.models.bert import (
    IGNORE_INDEX,
    BERTConfig,
    BERTForMaskedLM,
    BERTForSequenceClassification,
    attention_mask_to_bool,
    mask_tokens,
)
from mtlib.utils import fixed_generator, seed_everything

__all__ = [
    "CHECKPOINT",
    "BagOfEmbeddings",
    "FinetuneSettings",
    "Phrase",
    "PretrainSettings",
    "Vocab",
    "accuracy",
    "classifier_from_pretrained",
    "corpus",
    "distill",
    "encode_phrases",
    "fill_mask",
    "last_layer_attention",
    "n_params",
    "ngram_baselines",
    "shuffled_copy",
    "control_runs",
    "seconds_per_batch",
    "task_data",
    "token_roles",
    "finetune",
    "load_checkpoint",
    "mlm_accuracy",
    "mlm_windows",
    "model_config",
    "phrases",
    "pretrain",
    "save_checkpoint",
    "student_from_teacher",
]

#: Where the chapter's checkpoint lives (inside the package, so that it installs with mtlib).
CHECKPOINT = Path(str(resources.files("mtlib.experiments"))) / "bert_mlm_checkpoint.pt"
SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")
EVAL_SEED = 1234  # the fixed masking of the held-out windows that every report uses


# --------------------------------------------------------------------------------------------
# Corpus, tokenizer, windows
# --------------------------------------------------------------------------------------------


def corpus() -> tuple[str, str]:
    """Python's documentation topics as ``(train_text, heldout_text)``: every 10th topic held out.

    Runs of whitespace (the indentation of code examples and tables) become one space, so that
    the windows hold words rather than layout.
    """
    topics = pydoc_topics()

    names = sorted(topics)
    flat = {n: " ".join(topics[n].split()) for n in names}  # whitespace runs -> one space
    train_text = " ".join(flat[n] for i, n in enumerate(names) if i % 10 != 5)
    heldout_text = " ".join(flat[n] for i, n in enumerate(names) if i % 10 == 5)
    return train_text, heldout_text


class Vocab:
    """Chapter 2's BPE tokenizer plus BERT's special tokens, appended after the BPE ids.

    Args:
        tokenizer: a trained :class:`~mtlib.data.bpe.BPETokenizer`.

    Attributes:
        pad, cls, sep, mask: the special ids (``tokenizer.vocab_size`` + 0, 1, 2, 3).
        size: total number of ids.
    """

    def __init__(self, tokenizer: BPETokenizer) -> None:
        self.tokenizer = tokenizer
        base = tokenizer.vocab_size
        self.pad, self.cls, self.sep, self.mask = range(base, base + len(SPECIALS))
        self.size = base + len(SPECIALS)
        self.special_ids = (self.pad, self.cls, self.sep, self.mask)

    @classmethod
    def train(cls, text: str, vocab_size: int) -> Vocab:
        """Train the BPE tokenizer on ``text`` (``vocab_size`` BPE ids, before the specials)."""
        return cls(BPETokenizer.train(text, vocab_size))

    def encode(self, text: str) -> list[int]:
        """BPE ids of ``text``; the literal ``[MASK]`` becomes the mask id."""
        out: list[int] = []
        for i, part in enumerate(text.split("[MASK]")):
            if i:
                out.append(self.mask)
            out += self.tokenizer.encode(part)
        return out

    def token(self, i: int) -> str:
        """Readable text of one id (special tokens by name)."""
        if i >= self.tokenizer.vocab_size:
            return SPECIALS[i - self.tokenizer.vocab_size]
        return self.tokenizer.decode([i])


def mlm_windows(ids: Sequence[int], vocab: Vocab, length: int = 32) -> Tensor:
    """Cut a token stream into windows ``[CLS] t1 .. t_{length-2} [SEP]``: (N, length)."""
    body = length - 2
    n = len(ids) // body
    chunks = torch.tensor(ids[: n * body], dtype=torch.long).view(n, body)  # (N, length-2)
    cls = torch.full((n, 1), vocab.cls)
    sep = torch.full((n, 1), vocab.sep)
    return torch.cat([cls, chunks, sep], dim=1)  # (N, length)


# --------------------------------------------------------------------------------------------
# Pretraining
# --------------------------------------------------------------------------------------------


def model_config(vocab_size: int, **overrides: Any) -> BERTConfig:
    """The chapter's BERT: 4 layers, d_model 64, 4 heads, d_ff 256, 32 positions."""
    base = BERTConfig(vocab_size=vocab_size, d_model=64, num_heads=4, d_ff=256,
                      n_layer=4, dropout=0.0, pad_id=0, max_position=32)  # fmt: skip
    return dataclasses.replace(base, **overrides)


@dataclass
class PretrainSettings:
    """How the MLM is pretrained: random windows of the training text, AdamW, warm-up + cosine."""

    bpe_vocab: int = 1000  # BPE ids (256 bytes + 744 merges), before the 4 specials
    seq_len: int = 32  # window length, [CLS] and [SEP] included
    steps: int = 3000  # optimizer steps
    batch_size: int = 32  # windows per batch
    lr: float = 2e-3  # peak learning rate
    warmup: int = 100  # linear warm-up steps, then cosine decay
    mask_prob: float = 0.15  # BERT's 15%


def _mlm_loss(
    vocab: Vocab, mask_prob: float
) -> Callable[[nn.Module, tuple[Tensor, Tensor]], Tensor]:
    def loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        inputs, labels = batch
        assert isinstance(model, BERTForMaskedLM)
        chosen = labels != IGNORE_INDEX  # (B, T): the 15% to predict
        logits = model.head(model.bert(inputs)[chosen])  # (n_chosen, V): only where it counts
        return F.cross_entropy(logits, labels[chosen])

    return loss


def pretrain(
    settings: PretrainSettings,
    vocab: Vocab,
    windows: Tensor,
    *,
    seed: int,
    steps: int | None = None,
) -> tuple[BERTForMaskedLM, train.History]:
    """Pretrain the chapter's BERT on ``windows`` (N, T) with fresh masks at every step."""
    seed_everything(seed)
    config = model_config(vocab.size, pad_id=vocab.pad, max_position=settings.seq_len)
    model = BERTForMaskedLM(config)

    def batches(step: int) -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        rows = windows[torch.randint(len(windows), (settings.batch_size,), generator=g)]
        return mask_tokens(rows, mask_id=vocab.mask, vocab_size=vocab.size,
                           special_ids=vocab.special_ids, mask_prob=settings.mask_prob,
                           generator=g)  # fmt: skip

    history = train.fit(
        model, _mlm_loss(vocab, settings.mask_prob), batches, steps=steps or settings.steps,
        lr=settings.lr, schedule=train.warmup_cosine(settings.warmup, settings.steps),
        clip_norm=1.0, seed=seed,
    )  # fmt: skip
    return model.eval(), history


@torch.no_grad()
def mlm_accuracy(model: BERTForMaskedLM, vocab: Vocab, windows: Tensor, train_ids: Sequence[int],
                 *, seed: int = EVAL_SEED) -> dict[str, float]:  # fmt: skip
    """Accuracy at the masked positions of ``windows``, beside the unigram baseline.

    The baseline always predicts the most frequent token of the training text. Both are
    scored on the same positions (a fixed 15% mask drawn with ``seed``): all chosen positions,
    and those whose input was ``[MASK]`` (the 80%; the 10% left unchanged can be copied).

    Returns:
        ``{"accuracy", "unigram", "loss", "positions", "mask_accuracy", "mask_unigram",
        "mask_top5", "mask_loss", "mask_unigram_loss"}`` (losses in nats; the unigram's is the
        cross-entropy of the training text's add-one-smoothed token frequencies).
    """
    model.eval()
    g = fixed_generator(seed)  # the yardstick: never shifted by a seed sweep
    inputs, labels = mask_tokens(windows, mask_id=vocab.mask, vocab_size=vocab.size,
                                 special_ids=vocab.special_ids, generator=g)  # fmt: skip
    chosen = labels != IGNORE_INDEX
    at_mask = chosen & (inputs == vocab.mask)
    logits = torch.cat([model(part) for part in inputs.split(256)])  # (N, T, V)
    hits = logits.argmax(-1) == labels
    top5 = (logits.topk(5, dim=-1).indices == labels[..., None]).any(-1)  # (N, T)
    counts = Counter(train_ids)
    most_common = counts.most_common(1)[0][0]
    freq = torch.ones(vocab.size)  # add-one smoothed unigram distribution of the training text
    for token, n in counts.items():
        freq[token] += n
    unigram_logp = (freq / freq.sum()).log()  # (V,)
    loss = F.cross_entropy(logits[chosen], labels[chosen])
    return {
        "accuracy": hits[chosen].float().mean().item(),
        "unigram": (labels[chosen] == most_common).float().mean().item(),
        "loss": loss.item(),
        "positions": float(chosen.sum().item()),
        "mask_accuracy": hits[at_mask].float().mean().item(),
        "mask_unigram": (labels[at_mask] == most_common).float().mean().item(),
        "mask_top5": top5[at_mask].float().mean().item(),
        "mask_loss": F.cross_entropy(logits[at_mask], labels[at_mask]).item(),
        "mask_unigram_loss": -unigram_logp[labels[at_mask]].mean().item(),
    }


def ngram_baselines(vocab: Vocab, windows: Tensor, train_ids: Sequence[int], *,
                    seed: int = EVAL_SEED) -> dict[str, float]:  # fmt: skip
    """Count baselines at the ``[MASK]`` positions that :func:`mlm_accuracy` scores.

    Each predicts the training text's most frequent token given a neighbour of the masked
    position in the input: ``"bigram_left"`` (the token before), ``"bigram_right"`` (the token
    after), ``"trigram"`` (both; falls back to the left bigram where the pair was never seen).
    A neighbour that is special (``[CLS]``, ``[SEP]``, ``[MASK]``) or unseen falls back to the
    unigram prediction.

    Returns:
        ``{"unigram", "bigram_left", "bigram_right", "trigram", "positions"}`` (accuracies).
    """
    g = fixed_generator(seed)  # the yardstick: never shifted by a seed sweep
    inputs, labels = mask_tokens(windows, mask_id=vocab.mask, vocab_size=vocab.size,
                                 special_ids=vocab.special_ids, generator=g)  # fmt: skip
    at_mask = (labels != IGNORE_INDEX) & (inputs == vocab.mask)  # (N, T)
    top = Counter(train_ids).most_common(1)[0][0]
    after: dict[int, Counter[int]] = {}
    before: dict[int, Counter[int]] = {}
    between: dict[tuple[int, int], Counter[int]] = {}
    for a, b, c in zip(train_ids, train_ids[1:], train_ids[2:], strict=False):
        after.setdefault(a, Counter())[b] += 1
        before.setdefault(c, Counter())[b] += 1
        between.setdefault((a, c), Counter())[b] += 1
    special = set(vocab.special_ids)
    hits = dict.fromkeys(("unigram", "bigram_left", "bigram_right", "trigram"), 0)
    positions = at_mask.nonzero().tolist()
    for n, t in positions:
        left, right, target = (int(inputs[n, t - 1]), int(inputs[n, t + 1]), int(labels[n, t]))
        by_left = after[left].most_common(1)[0][0] if left not in special and left in after else top
        by_right = (
            before[right].most_common(1)[0][0] if right not in special and right in before else top
        )
        pair = (left, right)
        both = (between[pair].most_common(1)[0][0]
                if left not in special and right not in special and pair in between else by_left)  # fmt: skip
        for name, guess in (("unigram", top), ("bigram_left", by_left),
                            ("bigram_right", by_right), ("trigram", both)):  # fmt: skip
            hits[name] += guess == target
    out = {k: v / len(positions) for k, v in hits.items()}
    return out | {"positions": float(len(positions))}


@torch.no_grad()
def fill_mask(
    model: BERTForMaskedLM, vocab: Vocab, text: str, k: int = 5
) -> list[tuple[str, float]]:
    """Top-``k`` tokens (text, probability) for the one ``[MASK]`` in ``text``."""
    ids = [vocab.cls, *vocab.encode(text), vocab.sep]
    if ids.count(vocab.mask) != 1:
        raise ValueError(f"text must contain exactly one [MASK], got {text!r}")
    model.eval()
    logits = model(torch.tensor([ids]))[0, ids.index(vocab.mask)]  # (V,)
    logits[list(vocab.special_ids)] = float("-inf")
    probs, top = logits.softmax(-1).topk(k)
    return [(vocab.token(int(i)), float(p)) for p, i in zip(probs, top, strict=True)]


# --------------------------------------------------------------------------------------------
# Fine-tuning task: sentiment where order and negation matter
# --------------------------------------------------------------------------------------------

POSITIVE = ("good", "valid", "correct", "safe", "useful", "fine", "right", "clean")
NEGATIVE = ("bad", "invalid", "wrong", "unsafe", "useless", "broken", "poor", "slow")
#: template -> how the label follows from the polarity s(a) of the first word, s(b) of the second
TEMPLATES: dict[str, str] = {
    "{a}": "s(a)",
    "not {a}": "-s(a)",
    "not {a} at all": "-s(a)",
    "{a}, not {b}": "s(a)",
    "not {a}, {b}": "s(b)",
    "{a} but {b}": "s(b)",
    "{a} and not {b}": "s(a)",
    "not {a} but {b}": "s(b)",
}


@dataclass(frozen=True)
class Phrase:
    """One example: text, label (1 positive, 0 negative), template, held-out flag, its words."""

    text: str
    label: int
    template: str
    heldout: bool
    a: str  # the first sentiment word
    b: str  # the second (= a in one-word templates)


def _is_heldout(key: str, share: float = 0.25) -> bool:
    digest = hashlib.sha256(key.encode()).digest()
    return digest[0] < 256 * share


def phrases() -> list[Phrase]:
    """Every phrase of the task; a fixed hash holds out a quarter of the word combinations.

    Two-word templates pair words of opposite polarity ("good, not bad"), so that the label
    depends on which word comes where; a held-out phrase is a combination of words and template
    never seen in training (each word and template occur in training in other combinations).
    """
    polarity = {w: 1 for w in POSITIVE} | {w: -1 for w in NEGATIVE}
    words = POSITIVE + NEGATIVE
    out: list[Phrase] = []
    for template, rule in TEMPLATES.items():
        pairs = [(a, a) for a in words] if "{b}" not in template else [
            (a, b) for a in words for b in words if polarity[a] != polarity[b]]  # fmt: skip
        for a, b in pairs:
            s = {"s(a)": polarity[a], "-s(a)": -polarity[a], "s(b)": polarity[b]}[rule]
            text = template.format(a=a, b=b)
            out.append(Phrase(text, int(s > 0), template, _is_heldout(text), a, b))
    return out


def encode_phrases(vocab: Vocab, items: Sequence[Phrase], *,
                   leading_space: bool = False) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """``[CLS] phrase [SEP]``, right-padded: ``(input_ids (N, T), attention_mask (N, T), labels (N,))``.

    By default the first word has no leading space: BPE's ``"good"`` and ``" good"`` are
    different tokens, so a phrase's first word is told apart from the same word later on.
    ``leading_space=True`` encodes ``" " + text``, so that every word is spelled as inside a
    sentence (the control of the chapter's tokenization effect).
    """
    prefix = " " if leading_space else ""
    rows = [[vocab.cls, *vocab.encode(prefix + p.text), vocab.sep] for p in items]
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), vocab.pad)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids, (ids != vocab.pad).long(), torch.tensor([p.label for p in items])


class BagOfEmbeddings(nn.Module):
    """The order-blind baseline: mean of the token embeddings, then a 2-layer MLP.

    Shape:
        forward: input_ids (B, T), attention_mask (B, T) -> logits (B, 2).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 2))

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Logits (B, 2) from the masked mean of the embeddings."""
        w = attention_mask.unsqueeze(-1).float()  # (B, T, 1)
        mean = (self.embed(input_ids) * w).sum(1) / w.sum(1)  # (B, d_model)
        return self.mlp(mean)


@dataclass
class FinetuneSettings:
    """How a classifier is fine-tuned on the training phrases."""

    steps: int = 150  # optimizer steps
    batch_size: int = 32  # phrases per batch, drawn from the training phrases
    lr: float = 1e-3  # peak learning rate (linear warm-up, cosine decay)
    warmup: int = 15


def classifier_from_pretrained(mlm: BERTForMaskedLM | None, vocab: Vocab, *, n_layer: int = 4,
                               init_std: float | None = None) -> BERTForSequenceClassification:  # fmt: skip
    """A 2-class BERT; with ``mlm``, its encoder starts from the pretrained one (the pooler and
    the classifier start random, as in BERT). Without, everything is random: the control
    (``init_std`` overrides the random initialisation's standard deviation, 0.02 by default)."""
    extra = {} if init_std is None else {"init_std": init_std}
    config = model_config(vocab.size, pad_id=vocab.pad, n_layer=n_layer, **extra)
    model = BERTForSequenceClassification(config, num_labels=2)
    if mlm is not None:
        missing = model.bert.load_state_dict(mlm.bert.state_dict(), strict=False)
        assert sorted(missing.missing_keys) == ["pooler.bias", "pooler.weight"], missing
    return model


def _forward(model: nn.Module, ids: Tensor, mask: Tensor) -> Tensor:
    if isinstance(model, BagOfEmbeddings):
        return model(ids, mask)
    return model(ids, attention_mask=mask)


def finetune(model: nn.Module, data: tuple[Tensor, Tensor, Tensor], settings: FinetuneSettings,
             *, seed: int, teacher: nn.Module | None = None, temperature: float = 2.0,
             alpha: float = 0.5) -> train.History:  # fmt: skip
    """Train ``model`` on ``data`` (ids, mask, labels); with a ``teacher``, by distillation.

    Distillation {Hinton et al. 2015}: the loss is ``alpha`` times the KL divergence between
    the teacher's and the student's softmax at ``temperature`` (scaled by T^2, so that its
    gradients keep their size), plus ``1 - alpha`` times the cross-entropy with the labels.
    """
    ids, mask, labels = data
    soft = None
    if teacher is not None:
        teacher.eval()
        with torch.no_grad():
            soft = F.log_softmax(_forward(teacher, ids, mask) / temperature, dim=-1)  # (N, 2)

    def batches(step: int) -> Tensor:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        return torch.randint(len(ids), (settings.batch_size,), generator=g)

    def loss_fn(m: nn.Module, rows: Tensor) -> Tensor:
        logits = _forward(m, ids[rows], mask[rows])  # (b, 2)
        hard = F.cross_entropy(logits, labels[rows])
        if soft is None:
            return hard
        student = F.log_softmax(logits / temperature, dim=-1)
        kl = F.kl_div(student, soft[rows], log_target=True, reduction="batchmean")
        return alpha * temperature**2 * kl + (1 - alpha) * hard

    return train.fit(model, loss_fn, batches, steps=settings.steps, lr=settings.lr,
                     schedule=train.warmup_cosine(settings.warmup, settings.steps),
                     clip_norm=1.0, seed=seed)  # fmt: skip


@torch.no_grad()
def accuracy(model: nn.Module, data: tuple[Tensor, Tensor, Tensor]) -> float:
    """Share of ``data``'s phrases classified correctly (eval mode)."""
    ids, mask, labels = data
    was = model.training
    model.eval()
    predicted = _forward(model, ids, mask).argmax(-1)
    model.train(was)
    return (predicted == labels).float().mean().item()


def student_from_teacher(teacher: BERTForSequenceClassification) -> BERTForSequenceClassification:
    """DistilBERT's initialisation: the teacher with every other layer (0, 2, ...) kept."""
    config = dataclasses.replace(
        teacher.bert.config, n_layer=(teacher.bert.config.n_layer + 1) // 2
    )
    student = BERTForSequenceClassification(config, num_labels=teacher.classifier.out_features)
    state = teacher.state_dict()
    for i in range(config.n_layer):  # student block i <- teacher block 2 i
        for name in list(state):
            if name.startswith(f"bert.blocks.{2 * i}."):
                state[name.replace(f"blocks.{2 * i}.", f"blocks.{i}.", 1)] = state[name]
    keep = student.state_dict()
    student.load_state_dict({k: state[k] for k in keep})
    return student


def distill(teacher: BERTForSequenceClassification, data: tuple[Tensor, Tensor, Tensor],
            settings: FinetuneSettings, *, seed: int, temperature: float = 2.0,
            alpha: float = 0.5, soft: bool = True) -> BERTForSequenceClassification:  # fmt: skip
    """A half-depth student initialised from ``teacher``, trained on its soft targets
    (``soft=True``: loss ``alpha`` tau^2 KL + ``(1 - alpha)`` CE, see :func:`finetune`) or on
    the labels only (``soft=False``, the control)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    student = student_from_teacher(teacher)
    finetune(student, data, settings, seed=seed, teacher=teacher if soft else None,
             temperature=temperature, alpha=alpha)  # fmt: skip
    return student.eval()


def task_data(vocab: Vocab, *, leading_space: bool = False,
              ) -> tuple[tuple[Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]:  # fmt: skip
    """The encoded training and held-out phrases: ``(train, heldout)``, each (ids, mask, labels)."""
    items = phrases()
    return (encode_phrases(vocab, [p for p in items if not p.heldout], leading_space=leading_space),
            encode_phrases(vocab, [p for p in items if p.heldout], leading_space=leading_space))  # fmt: skip


def seconds_per_batch(
    model: nn.Module, data: tuple[Tensor, Tensor, Tensor], repeats: int = 7
) -> float:
    """Fastest of ``repeats`` timed forward passes over ``data`` (eval mode, no gradients)."""
    ids, mask, _ = data
    model.eval()
    best = float("inf")
    with torch.no_grad():
        _forward(model, ids, mask)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            _forward(model, ids, mask)
            best = min(best, time.perf_counter() - start)
    return best


def n_params(model: nn.Module) -> int:
    """Number of parameters."""
    return sum(p.numel() for p in model.parameters())


def finetune_runs(mlm: BERTForMaskedLM, vocab: Vocab, seed: int,
                  settings: FinetuneSettings | None = None) -> dict[str, Any]:  # fmt: skip
    """One seed of the chapter's fine-tuning table: pretrained, from scratch (the control), bag of
    embeddings, and the teacher distilled into a 2-layer student with soft targets or labels only.

    Returns:
        Held-out accuracy per model (``"pretrained"``, ``"scratch"``, ``"bag"``, ``"student_soft"``,
        ``"student_hard"``), the training accuracies, parameter counts, and the models.
    """
    settings = settings or FinetuneSettings()
    train_data, heldout = task_data(vocab)
    out: dict[str, Any] = {"heldout": {}, "train": {}, "params": {}, "models": {}}
    for name in ("pretrained", "scratch", "bag"):
        torch.manual_seed(seed)
        if name == "bag":
            model: nn.Module = BagOfEmbeddings(vocab.size)
        else:
            model = classifier_from_pretrained(mlm if name == "pretrained" else None, vocab)
        finetune(model, train_data, settings, seed=seed)
        out["models"][name] = model.eval()
    teacher = out["models"]["pretrained"]
    for soft in (True, False):
        student = distill(teacher, train_data, settings, seed=seed, soft=soft)
        out["models"]["student_soft" if soft else "student_hard"] = student
    for name, model in out["models"].items():
        out["heldout"][name] = accuracy(model, heldout)
        out["train"][name] = accuracy(model, train_data)
        out["params"][name] = n_params(model)
    return out


def shuffled_copy(mlm: BERTForMaskedLM, seed: int) -> BERTForMaskedLM:
    """A copy of ``mlm`` with every weight tensor's entries randomly permuted: the pretrained
    weights' scale and distribution, none of their structure (a control)."""
    out = BERTForMaskedLM(mlm.bert.config)
    out.load_state_dict(mlm.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in out.parameters():
            flat = p.reshape(-1)  # (numel,)
            p.copy_(flat[torch.randperm(flat.numel(), generator=g)].view_as(p))
    return out.eval()


#: the controls of the fine-tuning table: name -> (initialisation, leading space, steps)
CONTROLS: dict[str, tuple[str, bool, int]] = {
    "scratch_std05": ("scratch_std05", False, 150),  # random, init std 0.05 instead of 0.02
    "shuffled": ("shuffled", False, 150),  # pretrained weights permuted within each tensor
    "space_pretrained": ("pretrained", True, 150),  # every phrase encoded with a leading space
    "space_scratch": ("scratch", True, 150),
    "space_pretrained_300": ("pretrained", True, 300),
    "space_scratch_300": ("scratch", True, 300),
}


def control_runs(mlm: BERTForMaskedLM, vocab: Vocab, seed: int) -> dict[str, float]:
    """Held-out accuracy of each of ``CONTROLS`` for one fine-tuning seed (the other settings
    are :class:`FinetuneSettings`'s, warm-up a tenth of the steps)."""
    out: dict[str, float] = {}
    for name, (init, space, steps) in CONTROLS.items():
        train_data, heldout = task_data(vocab, leading_space=space)
        torch.manual_seed(seed)
        if init == "scratch_std05":
            model = classifier_from_pretrained(None, vocab, init_std=0.05)
        elif init == "shuffled":
            model = classifier_from_pretrained(shuffled_copy(mlm, seed), vocab)
        else:
            model = classifier_from_pretrained(mlm if init == "pretrained" else None, vocab)
        finetune(model, train_data, FinetuneSettings(steps=steps, warmup=steps // 10), seed=seed)
        out[name] = round(accuracy(model, heldout), 4)
    return out


#: The roles a token of a task phrase can have, in display order.
ROLES = ("[CLS]", "first word", "not", "second word", "other", "[SEP]")


def token_roles(vocab: Vocab, phrase: Phrase) -> list[str]:
    """The role (one of ``ROLES``) of each token of ``[CLS] phrase [SEP]``."""
    roles = ["[CLS]"]
    first_seen = False
    for chunk in pretokenize(phrase.text):
        word = chunk.strip()
        if word == phrase.a and not first_seen:
            role, first_seen = "first word", True
        elif word == phrase.b and first_seen and "{b}" in phrase.template:
            role = "second word"
        elif word == "not":
            role = "not"
        else:
            role = "other"
        roles += [role] * len(vocab.tokenizer.encode(chunk))
    return roles + ["[SEP]"]


@torch.no_grad()
def last_layer_attention(model: BERTForSequenceClassification, ids: Tensor, mask: Tensor) -> Tensor:
    """The last block's attention weights (B, H, T, T)."""
    bert = model.bert
    bool_mask = attention_mask_to_bool(mask, ids)  # (B, 1, 1, T)
    x = bert.embed(ids)  # (B, T, d_model)
    for block in bert.blocks[:-1]:
        x = block(x, mask=bool_mask)
    last = bert.blocks[-1]
    assert isinstance(last, EncoderBlock)
    return last.forward_with_weights(x, mask=bool_mask)[1]  # (B, H, T, T)


# --------------------------------------------------------------------------------------------
# Checkpoint
# --------------------------------------------------------------------------------------------


def save_checkpoint(
    model: BERTForMaskedLM, vocab: Vocab, path: Path, report: dict[str, Any]
) -> None:
    """Save config, weights (float16: the checkpoint stays under 2 MB), merges and the report."""
    weights = {k: v.half() for k, v in model.state_dict().items()}
    state = {"config": asdict(model.bert.config), "model": weights,
             "merges": vocab.tokenizer.merges, "report": report}  # fmt: skip
    torch.save(state, path)


def load_checkpoint(path: Path | None = None) -> tuple[BERTForMaskedLM, Vocab, dict[str, Any]]:
    """Load the chapter's checkpoint: ``(model in eval mode, vocab, report)``."""
    state = torch.load(CHECKPOINT if path is None else path, map_location="cpu", weights_only=True)
    model = BERTForMaskedLM(BERTConfig(**state["config"]))
    model.load_state_dict({k: v.float() for k, v in state["model"].items()})
    vocab = Vocab(BPETokenizer([tuple(m) for m in state["merges"]]))
    return model.eval(), vocab, state["report"]


def main(argv: list[str] | None = None) -> None:
    """Pretrain the chapter's models and write the checkpoint with its report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="pretraining seeds")  # fmt: skip
    parser.add_argument("--finetune-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    parser.add_argument(
        "--finetune-only",
        action="store_true",
        help="keep the checkpoint's pretrained model; redo the fine-tuning table",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the numbers the chapter reproduces were made on one thread
    if args.finetune_only:
        mlm, vocab, report = load_checkpoint(args.out)
        report["finetune"] = _finetune_table(mlm, vocab, args.finetune_seeds)
        save_checkpoint(mlm, vocab, args.out, report)
        return
    torch.set_num_threads(1)  # the numbers the chapter reproduces were made on one thread
    settings = PretrainSettings()
    if args.steps:
        settings.steps = args.steps
    train_text, heldout_text = corpus()
    vocab = Vocab.train(train_text, settings.bpe_vocab)
    train_ids = vocab.encode(train_text)
    windows = mlm_windows(train_ids, vocab, settings.seq_len)
    heldout = mlm_windows(vocab.encode(heldout_text), vocab, settings.seq_len)
    runs: dict[str, dict[str, Any]] = {}
    saved: BERTForMaskedLM | None = None
    for seed in args.seeds:
        start = time.time()
        model, history = pretrain(settings, vocab, windows, seed=seed)
        if saved is None:
            saved = model
            model.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
        result: dict[str, Any] = dict(mlm_accuracy(model, vocab, heldout, train_ids))
        result["seconds"] = round(time.time() - start, 1)
        result["loss_curve"] = history.loss[::10]
        runs[str(seed)] = result
        print(f"seed {seed}: held-out MLM accuracy {result['accuracy']:.4f}, at [MASK] "
            f"{result['mask_accuracy']:.4f} (unigram {result['mask_unigram']:.4f}), "
            f"{result['seconds']} s")  # fmt: skip
    assert saved is not None
    finetune_table = _finetune_table(saved, vocab, args.finetune_seeds)
    report = {"finetune": finetune_table, "settings": asdict(settings), "seed": args.seeds[0], "runs": runs,
              "train_tokens": len(train_ids), "heldout_windows": len(heldout),
              "train_windows": len(windows),
              "ngram": ngram_baselines(vocab, heldout, train_ids)}  # fmt: skip
    save_checkpoint(saved, vocab, args.out, report)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


def _finetune_table(mlm: BERTForMaskedLM, vocab: Vocab, seeds: Sequence[int]) -> dict[str, Any]:
    table: dict[str, Any] = {"settings": asdict(FinetuneSettings())}
    for seed in seeds:
        start = time.time()
        runs = finetune_runs(mlm, vocab, seed)
        heldout = {k: round(v, 4) for k, v in runs["heldout"].items()}
        table[str(seed)] = {"heldout": heldout, "train": runs["train"], "params": runs["params"],
                            "controls": control_runs(mlm, vocab, seed)}  # fmt: skip
        print(f"fine-tuning seed {seed}: held-out {heldout} ({time.time() - start:.0f} s)")
    return table


if __name__ == "__main__":
    main()
