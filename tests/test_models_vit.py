"""mtlib.models.vit: parity with Hugging Face's ViT (random init, no download), loading errors
that name the tensor, bad inputs, the ViT-B/16 parameter count and attention rollout."""

import pytest
import torch
from torch import nn

from mtlib.models import PatchEmbedding, ViT, ViTConfig, attention_rollout

transformers = pytest.importorskip("transformers")


def hf_config(num_channels=3, **overrides):
    """A small, odd ViT: 12 x 12 images, patches of 3 (16 patches), width 30, 5 heads."""
    settings = dict(
        image_size=12,
        patch_size=3,
        num_channels=num_channels,
        hidden_size=30,
        num_attention_heads=5,
        intermediate_size=37,
        num_hidden_layers=3,
        num_labels=7,
        layer_norm_eps=1e-12,
    )
    settings.update(overrides)
    return transformers.ViTConfig(**settings)


def small_config(**overrides):
    settings = dict(image_size=12, patch_size=3, num_channels=3, d_model=30, num_heads=5,
                    d_ff=37, n_layer=3, num_classes=7)  # fmt: skip
    settings.update(overrides)
    return ViTConfig(**settings)


def images(batch, channels, seed=0, size=12):
    return torch.randn(batch, channels, size, size, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("channels", [1, 3])
def test_vit_model_last_hidden_state_matches_hugging_face(channels):
    torch.manual_seed(channels)
    hf = transformers.ViTModel(hf_config(channels)).eval()
    ours = ViT.from_hf(hf).eval()
    assert ours.config.num_classes == 0 and isinstance(ours.head, nn.Identity)
    x = images(5, channels)  # batch 5 != 17 tokens
    with torch.no_grad():
        expected = hf(pixel_values=x).last_hidden_state
        got = ours.forward_features(x)
    assert got.shape == (5, 17, 30)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    # no head: ViT(x) is the class token's final state
    torch.testing.assert_close(ours(x), expected[:, 0], atol=1e-4, rtol=0)


@pytest.mark.parametrize("channels", [1, 3])
def test_image_classification_logits_match_hugging_face(channels):
    torch.manual_seed(10 + channels)
    hf = transformers.ViTForImageClassification(hf_config(channels)).eval()
    ours = ViT.from_hf(hf)
    assert not ours.training and ours.config.num_classes == 7
    x = images(4, channels, seed=1)
    with torch.no_grad():
        expected = hf(pixel_values=x).logits
        got = ours(x)
    assert got.shape == (4, 7)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_attention_weights_match_hugging_face_and_the_plain_forward():
    torch.manual_seed(3)
    hf = transformers.ViTModel(hf_config(3, attn_implementation="eager")).eval()
    ours = ViT.from_hf(hf).eval()
    x = images(2, 3, seed=4)
    with torch.no_grad():
        expected = hf(pixel_values=x, output_attentions=True).attentions
        tokens, attentions = ours.forward_features(x, return_attentions=True)
    assert len(attentions) == 3 and attentions[0].shape == (2, 5, 17, 17)
    for got, ref in zip(attentions, expected, strict=True):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(tokens, ours.forward_features(x), atol=1e-5, rtol=0)


def test_block_with_weights_equals_the_block_in_train_mode_too():
    model = ViT(small_config(dropout=0.2))
    block = model.layers[1]
    x = torch.randn(3, 17, 30)
    torch.manual_seed(5)
    expected = block(x)
    torch.manual_seed(5)
    got, weights = block.forward_with_weights(x)
    torch.testing.assert_close(got, expected)
    assert weights.shape == (3, 5, 17, 17)


def test_transformers_4_names_load_too():
    """transformers 4.x called the layers encoder.layer.N.attention.attention.query, ..."""

    class ViTModel(nn.Module):  # what from_hf sees of a 4.x ViTModel
        def __init__(self, real):
            super().__init__()
            self.real, self.config = real, real.config

        def state_dict(self, *args, **kwargs):
            old = {}
            for name, value in self.real.state_dict().items():
                for new, legacy in [
                    ("layers.", "encoder.layer."),
                    ("attention.q_proj", "attention.attention.query"),
                    ("attention.k_proj", "attention.attention.key"),
                    ("attention.v_proj", "attention.attention.value"),
                    ("attention.o_proj", "attention.output.dense"),
                    ("mlp.fc1", "intermediate.dense"),
                    ("mlp.fc2", "output.dense"),
                ]:
                    name = name.replace(new, legacy)
                old[name] = value
            return old

    torch.manual_seed(6)
    real = transformers.ViTModel(hf_config(1)).eval()
    legacy = ViTModel(real)
    assert "encoder.layer.2.attention.attention.value.bias" in legacy.state_dict()
    ours = ViT.from_hf(legacy).eval()
    x = images(2, 1, seed=7)
    with torch.no_grad():
        torch.testing.assert_close(
            ours.forward_features(x), real(pixel_values=x).last_hidden_state, atol=1e-4, rtol=0
        )


def test_pooler_is_ignored_and_mask_token_too():
    hf = transformers.ViTModel(hf_config(3), add_pooling_layer=True, use_mask_token=True)
    assert any(k.startswith("pooler.") for k in hf.state_dict())
    ours = ViT.from_hf(hf)
    assert not any("pool" in name or "mask" in name for name in ours.state_dict())


def test_load_errors_name_the_tensor(monkeypatch):
    hf = transformers.ViTForImageClassification(hf_config(3))
    state = hf.state_dict()

    def with_state(tensors):
        monkeypatch.setattr(hf, "state_dict", lambda *a, **k: tensors)

    with_state({k: v for k, v in state.items() if k != "vit.layers.1.mlp.fc2.bias"})
    with pytest.raises(ValueError, match=r"not written: \['layers\.1\.ff\.linear2\.bias'\]"):
        ViT.from_hf(hf)
    with_state({**state, "vit.layers.0.attention.extra.weight": torch.zeros(3)})
    with pytest.raises(
        ValueError,
        match=r"layers\.0\.attention\.extra\.weight \(ours: layers\.0\.self_attn\.extra\.weight\) has no counterpart",
    ):
        ViT.from_hf(hf)
    with_state({**state, "vit.embeddings.position_embeddings": torch.zeros(1, 16, 30)})
    with pytest.raises(
        ValueError,
        match=r"shape mismatch copying embeddings\.position_embeddings into pos_embed: theirs \(1, 16, 30\), ours \(1, 17, 30\)",
    ):
        ViT.from_hf(hf)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"hidden_act": "gelu_new"}, r"hidden_act must be 'gelu'"),
        ({"qkv_bias": False}, r"qkv_bias must be True"),
        ({"attention_probs_dropout_prob": 0.1}, r"attention_probs_dropout_prob must equal"),
        ({"image_size": (12, 15)}, r"image_size must be an int"),
    ],
)
def test_unsupported_hf_configs_are_refused(overrides, match):
    hf = transformers.ViTModel(hf_config(3, **overrides))
    with pytest.raises(ValueError, match=match):
        ViT.from_hf(hf)


def test_from_hf_refuses_other_models():
    with pytest.raises(TypeError, match="ViTModel or ViTForImageClassification, got Linear"):
        ViT.from_hf(nn.Linear(3, 4))


# ---- our own model -------------------------------------------------------------------------


def test_patch_embedding_is_a_linear_map_of_row_major_patches():
    embed = PatchEmbedding(image_size=12, patch_size=3, num_channels=2, d_model=11)
    x = images(3, 2, seed=8)
    grid = x.reshape(3, 2, 4, 3, 4, 3)  # (B, C, rows, p, cols, p)
    patches = grid.permute(0, 2, 4, 1, 3, 5).reshape(3, 16, 18)  # (B, N, C*p*p)
    expected = patches @ embed.proj.weight.reshape(11, 18).T + embed.proj.bias
    torch.testing.assert_close(embed(x), expected, atol=1e-5, rtol=0)


def test_shapes_and_parameter_layout():
    model = ViT(small_config(num_channels=1))
    x = images(6, 1, seed=9)
    assert model(x).shape == (6, 7)
    assert model.forward_features(x).shape == (6, 17, 30)
    assert model.pos_embed.shape == (1, 17, 30) and model.cls_token.shape == (1, 1, 30)
    block = model.layers[0]
    assert block.norm_first and isinstance(block.ff.activation, nn.GELU)
    assert block.ff.activation.approximate == "none" and block.norm1.eps == 1e-12


def test_patches_are_all_that_matters_without_positions():
    """Zero position embeddings: permuting the patches leaves the class token unchanged."""
    torch.manual_seed(11)
    model = ViT(small_config()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)  # larger than the 0.02 init, so that every input matters
        model.pos_embed.zero_()
    x = images(2, 3, seed=10)
    blocks = x.reshape(2, 3, 4, 3, 4, 3)
    shuffled = blocks.flip(2).reshape(2, 3, 12, 12)  # rows of patches in reverse order
    with torch.no_grad():
        torch.testing.assert_close(model(shuffled), model(x), atol=1e-5, rtol=0)
        model.pos_embed.normal_()
        assert (model(shuffled) - model(x)).abs().max() > 1e-3


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        ({"image_size": 13}, ValueError, r"image_size=13 must be divisible by patch_size=3"),
        ({"num_heads": 4}, ValueError, r"d_model=30 must be divisible by num_heads=4"),
        ({"num_classes": -1}, ValueError, r"num_classes must be an int >= 0"),
        ({"dropout": 1.5}, ValueError, r"dropout"),
        ({"patch_size": 0}, ValueError, r"patch_size"),
    ],
)
def test_bad_configs_are_refused(overrides, error, match):
    with pytest.raises(error, match=match):
        small_config(**overrides)


def test_bad_inputs_are_refused():
    model = ViT(small_config())
    with pytest.raises(
        ValueError,
        match=r"pixel_values must have shape \(batch, channels=3, 12, 12\), got \(2, 1, 12, 12\)",
    ):
        model(images(2, 1))
    with pytest.raises(ValueError, match=r"got \(2, 3, 13, 13\)"):
        model(images(2, 3, size=13))
    with pytest.raises(ValueError, match=r"got \(3, 12, 12\)"):
        model(images(1, 3)[0])
    with pytest.raises(TypeError, match=r"pixel_values must be a floating-point Tensor"):
        model(torch.zeros(2, 3, 12, 12, dtype=torch.long))
    with pytest.raises(TypeError, match="config must be a ViTConfig"):
        ViT({"image_size": 12})
    with pytest.raises(ValueError, match="divisible by patch_size=5"):
        PatchEmbedding(12, 5, 1, 8)


def test_base_patch16_224_parameter_count():
    config = ViTConfig.base_patch16_224(num_classes=0)
    with torch.device("meta"):
        features = ViT(config)
        classifier = ViT(ViTConfig.base_patch16_224())
    # Hugging Face's ViTModel(ViTConfig(), add_pooling_layer=False) has 85,798,656 parameters
    assert sum(p.numel() for p in features.parameters()) == 85_798_656
    assert sum(p.numel() for p in classifier.parameters()) == 85_798_656 + 768 * 1000 + 1000
    assert config.num_patches == 196 and features.pos_embed.shape == (1, 197, 768)


def test_base_count_equals_hugging_face():
    with torch.device("meta"):
        hf = transformers.ViTModel(transformers.ViTConfig(), add_pooling_layer=False)
    assert sum(p.numel() for p in hf.parameters()) == 85_798_656


# ---- attention rollout ---------------------------------------------------------------------


def test_rollout_by_hand():
    """Two layers, three tokens, two heads: every number below was worked out on paper."""
    layer1 = torch.tensor([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]],
                           [[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0]]])  # fmt: skip
    # head mean of layer 1: [[.5,.5,0],[.5,.5,0],[0,.5,.5]]; 0.5 A + 0.5 I:
    a1 = torch.tensor([[0.75, 0.25, 0.0], [0.25, 0.75, 0.0], [0.0, 0.25, 0.75]])
    layer2 = torch.tensor([[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]]).expand(2, 3, 3)
    a2 = torch.tensor([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    # row 0 of a2 @ a1: 0.5 * [.75, .25, 0] + 0.5 * [0, .25, .75] = [.375, .25, .375]
    attentions = [layer1[None], layer2[None]]  # (B=1, H=2, T=3, T=3) each
    got = attention_rollout(attentions)
    assert got.shape == (1, 3, 3)
    torch.testing.assert_close(got[0], a2 @ a1)
    torch.testing.assert_close(got[0, 0], torch.tensor([0.375, 0.25, 0.375]))
    raw = attention_rollout(attentions, residual=False)[0]  # layer-2 mean @ layer-1 mean
    torch.testing.assert_close(raw[0], torch.tensor([0.0, 0.5, 0.5]))
    torch.testing.assert_close(got.sum(-1), torch.ones(1, 3))
    # already head-averaged (B, T, T) input gives the same
    torch.testing.assert_close(attention_rollout([a.mean(1) for a in attentions]), got)


def test_rollout_of_one_layer_and_bad_inputs():
    w = torch.softmax(torch.randn(2, 4, 5, 5), dim=-1)
    torch.testing.assert_close(attention_rollout([w], residual=False), w.mean(1))
    with pytest.raises(ValueError, match="non-empty list"):
        attention_rollout([])
    with pytest.raises(
        ValueError,
        match=r"attentions\[1\] must be a \(B, H, T, T\) or \(B, T, T\) tensor, got \(2, 5, 4\)",
    ):
        attention_rollout([w, torch.rand(2, 5, 4)])
    with pytest.raises(ValueError, match=r"attentions\[1\] has shape \(2, 6, 6\)"):
        attention_rollout([w, torch.rand(2, 6, 6)])


def test_rollout_of_a_model():
    model = ViT(small_config()).eval()
    with torch.no_grad():
        _, attentions = model.forward_features(images(3, 3), return_attentions=True)
    rollout = attention_rollout(attentions)
    assert rollout.shape == (3, 17, 17) and (rollout >= 0).all()
    torch.testing.assert_close(rollout.sum(-1), torch.ones(3, 17))


def test_rollout_residual_weight():
    g = torch.Generator().manual_seed(5)
    attentions = [torch.rand(2, 3, 6, 6, generator=g).softmax(-1) for _ in range(2)]
    eye = torch.eye(6)
    layers = [0.7 * a.mean(1) + 0.3 * eye for a in attentions]  # alpha = 0.3 on the identity
    torch.testing.assert_close(
        attention_rollout(attentions, residual_weight=0.3), layers[1] @ layers[0]
    )
    torch.testing.assert_close(
        attention_rollout(attentions, residual_weight=0.0),
        attention_rollout(attentions, residual=False),
    )
    torch.testing.assert_close(
        attention_rollout(attentions, residual_weight=1.0), eye.expand(2, 6, 6)
    )
    with pytest.raises(ValueError, match="residual_weight must be in"):
        attention_rollout(attentions, residual_weight=1.5)
