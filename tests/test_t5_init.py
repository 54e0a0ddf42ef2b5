"""T5's initialisation: a freshly built model's logits start at about unit scale in both variants.

The tied head (the original T5) reuses the N(0, 1) embedding and rescales the decoder output by
``d_model ** -0.5``; the untied head (T5 v1.1) has no rescale, so its own matrix must start at
``d_model ** -0.5`` (T5X's fan-in default). Hugging Face draws an untied head from N(0, 1), which
makes the logits ``sqrt(d_model)`` times too large; chapter 14's break-it trains that case.
Sizes are odd on purpose: 3 heads of d_kv 20 (inner width 60) on d_model 48, 11 encoder and 7
decoder tokens.
"""

from __future__ import annotations

import math

import pytest
import torch

from mtlib.models.t5 import T5, T5Config


def tiny(tied: bool, proj: str) -> T5Config:
    return T5Config(vocab_size=97, d_model=48, d_kv=20, num_heads=3, d_ff=72, num_layers=2,
                    num_decoder_layers=3, dropout=0.0, feed_forward_proj=proj,
                    tie_word_embeddings=tied)  # fmt: skip


@pytest.mark.parametrize("proj", ["relu", "gated-gelu"])
@pytest.mark.parametrize("tied", [True, False])
def test_initial_logits_have_unit_scale(tied: bool, proj: str) -> None:
    torch.manual_seed(0)
    model = T5(tiny(tied, proj)).eval()
    src = torch.randint(2, 97, (4, 11))
    tgt = torch.randint(2, 97, (4, 7))
    with torch.no_grad():
        logits = model(src, tgt)  # (B, T_dec, V)
    assert logits.shape == (4, 7, 97)
    assert 0.5 < logits.std().item() < 2.0  # about unit scale, not sqrt(48) ~ 6.9
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 97), tgt.reshape(-1))
    assert loss.item() < math.log(97) + 1.5  # a sane start: near the uniform guess


def test_untied_head_is_fan_in_and_the_embedding_is_unit() -> None:
    torch.manual_seed(1)
    model = T5(tiny(False, "gated-gelu"))
    assert model.lm_head.weight is not model.shared.weight
    assert model.lm_head.weight.std().item() == pytest.approx(48**-0.5, rel=0.05)
    assert model.shared.weight.std().item() == pytest.approx(1.0, rel=0.05)
    # the Hugging Face convention (an N(0, 1) head) would start sqrt(d_model) times too large
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 1.0)
        logits = model.eval()(torch.randint(2, 97, (4, 11)), torch.randint(2, 97, (4, 7)))
    assert logits.std().item() > 4.0
