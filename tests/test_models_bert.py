"""mtlib.models.bert: parity with Hugging Face's BERT (random init, no download), the masking
rule, padding invariance, load errors, bad input, the base preset's size."""

import pytest
import torch

from mtlib.models import BERT, BERTConfig, BERTForMaskedLM, BERTForSequenceClassification
from mtlib.models.bert import IGNORE_INDEX, attention_mask_to_bool, mask_tokens

transformers = pytest.importorskip("transformers")

# odd sizes everywhere: hidden 30 (not a power of 2), 5 heads of 6, d_ff 37, vocab 61
SMALL = dict(vocab_size=61, hidden_size=30, num_hidden_layers=3, num_attention_heads=5,
             intermediate_size=37, max_position_embeddings=40, type_vocab_size=2)  # fmt: skip
B, T = 3, 11  # batch != seq_len


def hf_config(**overrides):
    return transformers.BertConfig(**{**SMALL, **overrides})


@pytest.fixture
def inputs():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 61, (B, T), generator=g)
    segments = (torch.arange(T) >= 6).long().expand(B, T).contiguous()  # sentence A then B
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0  # padded rows of different lengths
    mask[2, 4:] = 0
    ids = ids.masked_fill(mask == 0, 0)  # [PAD] = 0
    return ids, segments, mask


def test_bert_model_matches_hugging_face_with_padding_and_segments(inputs):
    ids, segments, mask = inputs
    torch.manual_seed(1)
    theirs = transformers.BertModel(hf_config()).eval()
    ours = BERT.from_hf(theirs)
    assert not ours.training and ours.config.layer_norm_eps == 1e-12
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask)
        hidden = ours(ids, segments, mask)
        pooled = ours.pool(hidden)
    assert hidden.shape == (B, T, 30)
    real = mask.bool()  # HF's padded positions attend normally; compare where it matters too
    torch.testing.assert_close(hidden[real], ref.last_hidden_state[real], atol=1e-4, rtol=0)
    torch.testing.assert_close(hidden, ref.last_hidden_state, atol=1e-4, rtol=0)
    torch.testing.assert_close(pooled, ref.pooler_output, atol=1e-4, rtol=0)
    assert (hidden[0] - hidden[0].mean()).abs().max() > 0.1  # not a trivial output


def test_layer_norm_epsilon_is_honoured(inputs):
    ids, segments, mask = inputs
    torch.manual_seed(2)
    theirs = transformers.BertModel(hf_config(layer_norm_eps=0.5)).eval()  # an epsilon that shows
    ours = BERT.from_hf(theirs)
    assert ours.blocks[0].norm1.eps == 0.5 and ours.embed_norm.eps == 0.5
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(ours(ids, segments, mask), ref, atol=1e-4, rtol=0)


def test_masked_lm_logits_match_hugging_face(inputs):
    ids, segments, mask = inputs
    torch.manual_seed(3)
    theirs = transformers.BertForMaskedLM(hf_config()).eval()
    with torch.no_grad():  # a non-zero output bias, so that the bias is really copied
        theirs.cls.predictions.bias.normal_()
    ours = BERTForMaskedLM.from_hf(theirs)
    assert ours.bert.pooler is None  # as HF's BertForMaskedLM
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask).logits
        logits = ours(ids, segments, mask)
    assert logits.shape == (B, T, 61)
    torch.testing.assert_close(logits, ref, atol=1e-4, rtol=0)
    # the decoder is tied: one matrix, not a copy
    n_ours = sum(p.numel() for p in ours.parameters())
    n_theirs = sum(p.numel() for p in theirs.parameters())  # HF shares the tied matrix too
    assert n_ours == n_theirs
    # the encoder alone loads from the head model's .bert (no pooler there)
    encoder = BERT.from_hf(theirs.bert)
    with torch.no_grad():
        ref_h = theirs.bert(input_ids=ids, token_type_ids=segments, attention_mask=mask)
        torch.testing.assert_close(
            encoder(ids, segments, mask), ref_h.last_hidden_state, atol=1e-4, rtol=0
        )
    with pytest.raises(ValueError, match="no pooler"):
        encoder.pool(torch.zeros(B, T, 30))


def test_sequence_classification_matches_hugging_face(inputs):
    ids, segments, mask = inputs
    torch.manual_seed(4)
    theirs = transformers.BertForSequenceClassification(hf_config(num_labels=3)).eval()
    ours = BERTForSequenceClassification.from_hf(theirs)
    with torch.no_grad():
        ref = theirs(input_ids=ids, token_type_ids=segments, attention_mask=mask).logits
        logits = ours(ids, segments, mask)
    assert logits.shape == (B, 3)
    torch.testing.assert_close(logits, ref, atol=1e-4, rtol=0)


@pytest.mark.parametrize(("classifier_dropout", "expected"), [(0.5, 0.5), (None, 0.2), (0.0, 0.0)])
def test_sequence_classification_keeps_the_classifier_dropout(classifier_dropout, expected):
    config = hf_config(num_labels=2, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2,
                       classifier_dropout=classifier_dropout)  # fmt: skip
    theirs = transformers.BertForSequenceClassification(config)
    ours = BERTForSequenceClassification.from_hf(theirs)
    assert theirs.dropout.p == expected  # Hugging Face's own fallback to hidden_dropout_prob
    assert ours.dropout.p == expected  # not silently the hidden dropout


def test_padding_does_not_change_the_real_tokens_outputs():
    torch.manual_seed(5)
    config = BERTConfig(vocab_size=61, max_position=40, d_model=30, num_heads=5, d_ff=37,
                        n_layer=3, dropout=0.0, init_std=0.3)  # fmt: skip  # sharp attention
    model = BERT(config).eval()
    short = torch.randint(1, 61, (1, 6))
    padded = torch.cat([short, torch.zeros(1, 5, dtype=torch.long)], dim=1)  # (1, 11)
    junk = torch.cat([short, torch.randint(1, 61, (1, 5))], dim=1)  # other ids under the mask
    mask = torch.tensor([[1] * 6 + [0] * 5])
    with torch.no_grad():
        alone = model(short)
        with_pad = model(padded, attention_mask=mask)
        with_junk = model(junk, attention_mask=mask)
        without_mask = model(padded)
    torch.testing.assert_close(with_pad[:, :6], alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(with_junk[:, :6], alone, atol=1e-5, rtol=0)
    assert (without_mask[:, :6] - alone).abs().max() > 1e-2  # the mask is what makes it so


def test_attention_mask_conversion():
    ids = torch.zeros(2, 4, dtype=torch.long)
    hf = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    mask = attention_mask_to_bool(hf, ids)
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, True, False], [True, False, False, False]]
    assert torch.equal(attention_mask_to_bool(hf.float(), ids), mask)
    assert torch.equal(attention_mask_to_bool(hf.bool(), ids), mask)
    assert attention_mask_to_bool(None, ids) is None
    with pytest.raises(ValueError, match="only 1 \\(token\\) and 0 \\(padding\\)"):
        attention_mask_to_bool(torch.tensor([[0.0, -1e9, 0.0, 0.0]] * 2), ids)  # additive mask
    with pytest.raises(ValueError, match="shape"):
        attention_mask_to_bool(hf[:, :3], ids)
    with pytest.raises(TypeError, match="Tensor"):
        attention_mask_to_bool([[1, 1, 1, 0]], ids)


def test_load_errors_name_the_tensor():
    torch.manual_seed(6)
    theirs = transformers.BertModel(hf_config()).eval()
    tensors = dict(theirs.state_dict())
    ours = BERT(BERT.config_from_hf(theirs.config))
    from mtlib.loading import load_weights
    from mtlib.models.bert import bert_renames

    renames = bert_renames(3)
    missing = {k: v for k, v in tensors.items() if k != "encoder.layer.1.attention.self.key.bias"}
    with pytest.raises(ValueError, match=r"blocks\.1\.self_attn\.k_proj\.bias"):
        load_weights(ours, missing, renames)
    extra = {**tensors, "encoder.layer.1.attention.self.rel_bias": torch.zeros(3)}
    with pytest.raises(ValueError, match=r"encoder\.layer\.1\.attention\.self\.rel_bias"):
        load_weights(ours, extra, renames)
    bad = {**tensors, "encoder.layer.2.intermediate.dense.weight": torch.zeros(36, 30)}
    with pytest.raises(
        ValueError, match=r"encoder\.layer\.2\.intermediate\.dense\.weight.*\(36, 30\)"
    ):
        load_weights(ours, bad, renames)
    untied = transformers.BertForMaskedLM(hf_config(tie_word_embeddings=False))
    with pytest.raises(ValueError, match="cls.predictions.decoder.weight must be tied"):
        BERTForMaskedLM.from_hf(untied)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hidden_act": "relu"}, 'hidden_act must be "gelu"'),
        ({"hidden_act": "gelu_new"}, 'hidden_act must be "gelu"'),
        ({"position_embedding_type": "relative_key"}, 'position_embedding_type must be "absolute"'),
        ({"is_decoder": True}, "is_decoder"),
        ({"attention_probs_dropout_prob": 0.2}, "must be equal"),
    ],
)
def test_unsupported_configs_are_refused(overrides, message):
    config = hf_config(**overrides)
    with pytest.raises(ValueError, match=message):
        BERT.config_from_hf(config)


def test_bad_inputs_are_refused():
    model = BERT(
        BERTConfig(vocab_size=61, max_position=8, d_model=30, num_heads=5, d_ff=37, n_layer=1)
    )
    with pytest.raises(ValueError, match="max_position=8"):
        model(torch.zeros(2, 9, dtype=torch.long))
    with pytest.raises((TypeError, ValueError), match="input_ids"):
        model(torch.zeros(2, 5))  # float ids
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.full((2, 5), 61))  # outside the vocabulary
    with pytest.raises(ValueError, match="token_type_ids"):
        model(torch.zeros(2, 5, dtype=torch.long), torch.full((2, 5), 2))  # segment 2 of 2
    with pytest.raises(ValueError, match="token_type_ids must have the shape"):
        model(torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="num_heads"):
        BERTConfig(d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="pad_id"):
        BERTConfig(vocab_size=10, pad_id=10)


def test_base_preset_has_bert_base_uncaseds_parameter_count():
    with torch.device("meta"):  # no memory, no time: count only
        model = BERT(BERTConfig.base())
    assert sum(p.numel() for p in model.parameters()) == 109_482_240
    assert BERTConfig.base(n_layer=6).n_layer == 6


def test_mask_tokens_follows_the_80_10_10_rule():
    V, CLS, SEP, PAD, MASK = 50, 0, 1, 2, 3
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, V, (400, 251), generator=g)
    ids[:, 0], ids[:, -1], ids[:7, 200:] = CLS, SEP, PAD
    inputs, labels = mask_tokens(
        ids, mask_id=MASK, vocab_size=V, special_ids=(CLS, SEP, PAD), generator=g
    )
    chosen = labels != IGNORE_INDEX
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    assert not chosen[special].any() and torch.equal(inputs[special], ids[special])
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    n = chosen.sum().item()
    assert abs(n / (~special).sum().item() - 0.15) < 0.005  # 15% of ~100k tokens
    as_mask = (inputs == MASK) & chosen
    kept = (inputs == ids) & chosen
    replaced = chosen & ~as_mask & ~kept
    assert abs(as_mask.sum().item() / n - 0.8) < 0.01
    assert abs(replaced.sum().item() / n - 0.1 * (1 - 1 / 46)) < 0.01  # a random id can be the same
    assert abs(kept.sum().item() / n - 0.1 * (1 + 1 / 46)) < 0.01
    assert inputs[replaced].min() >= 4  # random replacements are never special
    assert (inputs == MASK).sum() == as_mask.sum()  # [MASK] appears only where chosen
    again = mask_tokens(ids, mask_id=MASK, vocab_size=V, special_ids=(CLS, SEP, PAD),
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    first = mask_tokens(ids, mask_id=MASK, vocab_size=V, special_ids=(CLS, SEP, PAD),
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert all(torch.equal(a, b) for a, b in zip(again, first, strict=True))  # reproducible
