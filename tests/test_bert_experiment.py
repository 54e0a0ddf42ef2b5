"""Chapter 9's experiment: the checkpoint loads into the current code and reproduces its report,
training retraces the script's curve, the task and the distillation helpers do what they say.

The full reproduction (``python -m mtlib.experiments.bert_mlm``, about 15 minutes on one CPU
thread) is the slow test at the end, skipped unless ``MTLIB_SLOW=1``.
"""

import os

import pytest
import torch

from mtlib.experiments import bert_mlm as bm
from mtlib.models import BERTForMaskedLM


@pytest.fixture(scope="module")
def checkpoint():
    return bm.load_checkpoint()


@pytest.fixture(scope="module")
def data(checkpoint):
    _, vocab, _ = checkpoint
    train_text, heldout_text = bm.corpus()
    train_ids = vocab.encode(train_text)
    return (
        train_ids,
        bm.mlm_windows(train_ids, vocab),
        bm.mlm_windows(vocab.encode(heldout_text), vocab),
    )


def test_checkpoint_is_small_and_loads_into_the_current_code(checkpoint):
    model, vocab, report = checkpoint
    assert bm.CHECKPOINT.stat().st_size < 2_000_000
    assert isinstance(model, BERTForMaskedLM) and not model.training
    assert (
        vocab.size == model.bert.config.vocab_size == 1004 and vocab.pad == model.bert.config.pad_id
    )
    assert sorted(report["runs"]) == ["0", "1", "2"] and report["seed"] == 0
    assert {str(seed) for seed in range(6)} <= set(report["finetune"])  # six fine-tuning seeds
    for seed in ("0", "1", "2"):  # the controls of the chapter's table
        assert set(report["finetune"][seed]["controls"]) == set(bm.CONTROLS)


def test_the_tokenizer_is_chapter_2s_bpe_trained_on_the_training_topics(checkpoint):
    _, vocab, _ = checkpoint
    train_text, _ = bm.corpus()
    assert bm.Vocab.train(train_text, 1000).tokenizer.merges == vocab.tokenizer.merges


def test_checkpoint_reproduces_its_reported_mlm_accuracy(checkpoint, data):
    model, vocab, report = checkpoint
    train_ids, _, heldout = data
    got = bm.mlm_accuracy(model, vocab, heldout, train_ids)
    expected = report["runs"]["0"]
    assert abs(got["accuracy"] - expected["accuracy"]) <= 0.002
    assert abs(got["mask_accuracy"] - expected["mask_accuracy"]) <= 0.002
    assert got["mask_unigram"] == pytest.approx(expected["mask_unigram"], abs=1e-6)
    for run in report["runs"].values():  # the chapter's claim, for every seed
        assert run["mask_accuracy"] > 1.5 * run["mask_unigram"]
        assert run["mask_loss"] < run["mask_unigram_loss"] - 0.25


def test_ngram_baselines_reproduce_the_report(checkpoint, data):
    _, vocab, report = checkpoint
    train_ids, _, heldout = data
    got = bm.ngram_baselines(vocab, heldout, train_ids)
    assert got == pytest.approx(report["ngram"], abs=1e-9)
    assert got["unigram"] < got["bigram_left"] < got["bigram_right"] < got["trigram"]
    expected = bm.mlm_accuracy(*checkpoint[:2], heldout, train_ids)
    assert got["unigram"] == pytest.approx(expected["mask_unigram"], abs=1e-9)


def test_leading_space_spells_the_first_word_as_a_later_one(checkpoint):
    _, vocab, _ = checkpoint
    phrase = next(p for p in bm.phrases() if p.text == "good, not bad")
    plain, _, _ = bm.encode_phrases(vocab, [phrase])
    spaced, _, _ = bm.encode_phrases(vocab, [phrase], leading_space=True)
    assert plain[0, 1].item() != spaced[0, 1].item() == vocab.encode(" good")[0]
    with pytest.raises(ValueError, match="alpha"):
        bm.distill(bm.classifier_from_pretrained(None, vocab), bm.task_data(vocab)[0],
                   bm.FinetuneSettings(steps=1), seed=0, alpha=1.5)  # fmt: skip


def test_pretraining_retraces_the_scripts_curve(checkpoint, data):
    _, vocab, report = checkpoint
    _, windows, _ = data
    _, history = bm.pretrain(bm.PretrainSettings(), vocab, windows, seed=0, steps=21)
    torch.testing.assert_close(
        history.loss[::10], report["runs"]["0"]["loss_curve"][:3], atol=1e-3, rtol=0
    )


def test_finetuning_seed_0_reproduces_the_report(checkpoint):
    model, vocab, report = checkpoint
    train_data, heldout = bm.task_data(vocab)
    torch.manual_seed(0)
    clf = bm.classifier_from_pretrained(model, vocab)
    bm.finetune(clf, train_data, bm.FinetuneSettings(), seed=0)
    assert abs(bm.accuracy(clf, heldout) - report["finetune"]["0"]["heldout"]["pretrained"]) < 0.02


def test_the_task_pairs_opposite_words_and_holds_out_combinations_only():
    phrases = bm.phrases()
    by_text = {p.text: p for p in phrases}
    assert len(by_text) == len(phrases) == 16 * 3 + 5 * 2 * 8 * 8
    assert (by_text["good, not bad"].label, by_text["bad, not good"].label) == (1, 0)
    assert (by_text["not good"].label, by_text["not bad at all"].label) == (0, 1)
    assert (by_text["good but bad"].label, by_text["not bad but good"].label) == (0, 1)
    assert (by_text["not good, bad"].label, by_text["good and not bad"].label) == (0, 1)
    heldout = [p for p in phrases if p.heldout]
    assert 0.2 < len(heldout) / len(phrases) < 0.3
    seen = [p for p in phrases if not p.heldout]
    for p in heldout:  # every held-out word and template occurs in training
        assert any(q.template == p.template for q in seen)
        assert any(p.a in (q.a, q.b) for q in seen) and any(p.b in (q.a, q.b) for q in seen)


def test_token_roles_cover_every_token(checkpoint):
    _, vocab, _ = checkpoint
    for p in bm.phrases()[::37]:
        ids, _, _ = bm.encode_phrases(vocab, [p])
        roles = bm.token_roles(vocab, p)
        assert len(roles) == ids.shape[1] and roles[0] == "[CLS]" and roles[-1] == "[SEP]"
        assert ("not" in roles) == ("not" in p.text.split())


def test_student_starts_from_every_other_teacher_block(checkpoint):
    model, vocab, _ = checkpoint
    teacher = bm.classifier_from_pretrained(model, vocab)
    student = bm.student_from_teacher(teacher)
    assert student.bert.config.n_layer == 2
    for i, j in ((0, 0), (1, 2)):
        torch.testing.assert_close(
            student.bert.blocks[i].ff.linear1.weight, teacher.bert.blocks[j].ff.linear1.weight
        )
    torch.testing.assert_close(student.classifier.weight, teacher.classifier.weight)
    assert bm.n_params(student) < 0.7 * bm.n_params(teacher)


def test_last_layer_attention_is_the_blocks_own(checkpoint):
    model, vocab, _ = checkpoint
    clf = bm.classifier_from_pretrained(model, vocab).eval()
    ids, mask, _ = bm.encode_phrases(vocab, bm.phrases()[:7])
    w = bm.last_layer_attention(clf, ids, mask)
    assert w.shape == (7, 4, ids.shape[1], ids.shape[1])
    torch.testing.assert_close(w.sum(-1), torch.ones(7, 4, ids.shape[1]))
    assert (w * (mask == 0)[:, None, None, :]).abs().max() == 0  # no weight on padding


@pytest.mark.skipif(
    not os.environ.get("MTLIB_SLOW"), reason="pretrains a model (minutes): set MTLIB_SLOW=1"
)
def test_script_reproduces_the_checkpoint(tmp_path, checkpoint):
    _, _, report = checkpoint
    bm.main(["--seeds", "0", "--out", str(tmp_path / "again.pt")])
    _, _, again = bm.load_checkpoint(tmp_path / "again.pt")
    spread = [run["accuracy"] for run in report["runs"].values()]
    assert min(spread) - 0.01 <= again["runs"]["0"]["accuracy"] <= max(spread) + 0.01
