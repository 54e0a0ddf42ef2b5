import pytest
import torch

from mtlib.data import BOS, EOS, PAD, decode_symbols, sequence_task


def _real(batch, i):
    return batch.src[i, : batch.lengths[i]]


def _target(batch, i):
    n = int(batch.lengths[i])
    assert batch.tgt[i, 0] == BOS and batch.tgt[i, n + 1] == EOS
    assert (batch.tgt[i, n + 2 :] == PAD).all() and (batch.src[i, n:] == PAD).all()
    return batch.tgt[i, 1 : n + 1]


@pytest.mark.parametrize(
    "kind, transform",
    [("copy", lambda x: x), ("reverse", lambda x: x.flip(0)), ("sort", lambda x: x.sort().values)],
)
def test_targets_follow_the_task(kind, transform):
    batch = sequence_task(37, 2, 9, kind=kind, num_symbols=7, generator=torch.Generator().manual_seed(0))
    assert batch.src.shape == (37, int(batch.lengths.max())) and batch.tgt.shape == (37, batch.src.shape[1] + 2)
    assert batch.lengths.min() >= 2 and batch.lengths.max() <= 9
    for i in range(37):
        assert torch.equal(_target(batch, i), transform(_real(batch, i)))
        assert (_real(batch, i) >= 3).all() and (_real(batch, i) < 10).all()
    assert batch.vocab_size == 10  # the task's vocabulary: PAD, BOS, EOS and the 7 symbols
    one = sequence_task(1, 2, 2, kind=kind, num_symbols=7, generator=torch.Generator().manual_seed(0))
    assert one.vocab_size == 10  # whatever symbols this batch happens to contain


def test_same_seed_same_data():
    a = sequence_task(5, 1, 6, generator=torch.Generator().manual_seed(3))
    b = sequence_task(5, 1, 6, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.src, b.src) and torch.equal(a.tgt, b.tgt)


def test_decode_symbols_is_readable():
    assert decode_symbols(torch.tensor([BOS, 3, 12, EOS, PAD])) == "<s> 0 9 </s> _"
    with pytest.raises(ValueError, match=r"tokens must have shape \(T,\), got \(1, 2\)"):
        decode_symbols(torch.zeros(1, 2, dtype=torch.long))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 2, "min_len": 1, "max_len": 3, "kind": "shuffle"}, "kind must be one of"),
        ({"n": 0, "min_len": 1, "max_len": 3}, "n must be >= 1"),
        ({"n": 2, "min_len": 4, "max_len": 3}, "min_len <= max_len"),
        ({"n": 2, "min_len": 1, "max_len": 3, "num_symbols": 1}, "num_symbols >= 2"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sequence_task(**kwargs)


# --- mtlib.data.corpus: one copy of Python's help() topics for every machine -------------------


def test_pydoc_topics_is_the_shipped_text_and_a_fresh_copy():
    from mtlib.data import corpus

    topics = corpus.pydoc_topics()
    assert len(topics) == 79 and "if" in topics and "string-methods" in topics
    assert sum(len(t) for t in topics.values()) > 400_000
    assert "The \"if\" statement" in topics["if"]
    topics["if"] = "changed by the caller"
    assert corpus.pydoc_topics()["if"] != "changed by the caller"  # each call is a new dictionary


def test_pydoc_topics_refuses_a_file_that_fails_its_checksum(tmp_path, monkeypatch):
    import gzip
    import json

    from mtlib.data import corpus

    damaged = corpus.pydoc_topics()
    damaged["if"] = damaged["if"].replace("if", "iff", 1)  # one word of another Python release
    path = tmp_path / "pydoc_topics.json.gz"
    path.write_bytes(gzip.compress(json.dumps(damaged, sort_keys=True, indent=0).encode()))
    monkeypatch.setattr(corpus, "_TOPICS_FILE", path)
    corpus._topics_json.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="SHA-256"):
            corpus.pydoc_topics()
    finally:
        corpus._topics_json.cache_clear()


def test_the_experiments_read_the_shipped_corpus_not_the_running_python(monkeypatch):
    """A Python whose pydoc_data.topics differs (every release edits it) changes nothing."""
    import sys
    import types

    from mtlib.experiments import bert_mlm, char_lm, ddp, t5_pretrain

    before = (char_lm.corpus(), bert_mlm.corpus(), t5_pretrain.corpus_text(), ddp.dataset())
    fake = types.ModuleType("pydoc_data.topics")
    fake.topics = {"if": "another release's text"}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pydoc_data.topics", fake)
    after = (char_lm.corpus(), bert_mlm.corpus(), t5_pretrain.corpus_text(), ddp.dataset())
    assert before[:3] == after[:3]
    assert torch.equal(before[3], after[3])
