"""Tests of mtlib.loading: weights copied by name, every copy shape-checked, nothing left out.

These are the tests of 0.1's ``copy_weights`` and its weight tables, ported to 0.2's
``load_weights`` (a table of renames) and ``split_in_proj``. Sizes are distinct on purpose:
d_model 15 with 3 heads, d_ff 22, kdim 11, vdim 6.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from mtlib.attention import MultiHeadAttention
from mtlib.blocks import TORCH_RENAMES, BlockConfig, DecoderBlock, EncoderBlock
from mtlib.loading import load_weights, split_in_proj

D, H, FF, KDIM, VDIM = 15, 3, 22, 11, 6


def randomize_(module: nn.Module) -> nn.Module:
    """PyTorch initialises biases to 0 and LayerNorms to (1, 0): make every copy visible."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


def decoder_pair() -> tuple[nn.TransformerDecoderLayer, DecoderBlock, dict[str, Tensor]]:
    layer = randomize_(nn.TransformerDecoderLayer(D, H, FF, batch_first=True))
    block = DecoderBlock(BlockConfig(d_model=D, num_heads=H, d_ff=FF, dropout=0.0))
    return layer, block, split_in_proj(dict(layer.named_parameters()))


# ---------------------------------------------------------------------------- load_weights


def test_complete_table_loads_every_tensor() -> None:
    layer, block, tensors = decoder_pair()
    load_weights(block, tensors, TORCH_RENAMES)
    ours = block.state_dict()
    theirs = dict(layer.named_parameters())
    assert torch.equal(ours["ff.linear1.weight"], theirs["linear1.weight"])
    assert torch.equal(ours["ff.linear2.bias"], theirs["linear2.bias"])
    assert torch.equal(ours["norm3.weight"], theirs["norm3.weight"])
    assert torch.equal(ours["cross_attn.out_proj.weight"], theirs["multihead_attn.out_proj.weight"])
    for i, part in enumerate("qkv"):  # thirds 0, 1, 2 of the packed projections
        assert torch.equal(
            ours[f"self_attn.{part}_proj.weight"],
            theirs["self_attn.in_proj_weight"][i * D : (i + 1) * D],
        )
        assert torch.equal(
            ours[f"cross_attn.{part}_proj.bias"],
            theirs["multihead_attn.in_proj_bias"][i * D : (i + 1) * D],
        )
    # the loaded block computes what the layer computes
    layer.eval(), block.eval()
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    torch.testing.assert_close(block(x, memory), layer(x, memory), atol=1e-5, rtol=1e-5)


def test_missing_tensor_is_caught() -> None:
    _, block, tensors = decoder_pair()
    del tensors["norm3.bias"]
    with pytest.raises(
        ValueError,
        match=r"weight table incomplete: DecoderBlock parameters not written: \['norm3.bias'\]",
    ):
        load_weights(block, tensors, TORCH_RENAMES)
    # a rename left out of the table is caught too: linear1 has no counterpart without it
    _, block, tensors = decoder_pair()
    with pytest.raises(
        ValueError,
        match=r"linear1.weight \(ours: linear1.weight\) has no counterpart in DecoderBlock",
    ):
        load_weights(block, tensors, [r for r in TORCH_RENAMES if r[0] != "linear1"])


def test_shape_mismatch_is_caught() -> None:
    _, block, tensors = decoder_pair()
    tensors["linear1.weight"] = torch.zeros(FF + 1, D)
    with pytest.raises(
        ValueError,
        match=r"shape mismatch copying linear1.weight into ff.linear1.weight: theirs \(23, 15\), ours \(22, 15\)",
    ):
        load_weights(block, tensors, TORCH_RENAMES)


def test_unknown_name_is_caught() -> None:
    _, block, tensors = decoder_pair()
    tensors["extra.weight"] = torch.zeros(3)
    with pytest.raises(
        ValueError, match=r"extra.weight \(ours: extra.weight\) has no counterpart in DecoderBlock"
    ):
        load_weights(block, tensors, TORCH_RENAMES)
    # a bias that only one side has: the bias-free block has no linear1.bias
    enc = EncoderBlock(BlockConfig(d_model=D, num_heads=H, d_ff=FF, bias=False))
    source = split_in_proj(
        dict(nn.TransformerEncoderLayer(D, H, FF, batch_first=True).named_parameters())
    )
    with pytest.raises(ValueError, match=r"has no counterpart in EncoderBlock"):
        load_weights(enc, source, TORCH_RENAMES)


def test_failed_load_leaves_the_module_untouched() -> None:
    _, block, tensors = decoder_pair()
    before = {k: v.clone() for k, v in block.state_dict().items()}
    tensors["norm3.weight"] = torch.zeros(D + 1)  # the last tensor is wrong: nothing is copied
    with pytest.raises(ValueError, match="shape mismatch"):
        load_weights(block, tensors, TORCH_RENAMES)
    assert all(torch.equal(v, before[k]) for k, v in block.state_dict().items())


def test_renames_match_whole_components_and_the_first_wins() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ff = nn.ModuleDict({"linear1": nn.Linear(3, 5), "linear10": nn.Linear(5, 2)})

    net = Net()
    tensors = {
        "linear1.weight": torch.randn(5, 3),
        "linear1.bias": torch.randn(5),
        "ff.linear10.weight": torch.randn(2, 5),  # "linear1" must not match inside "linear10"
        "ff.linear10.bias": torch.randn(2),
    }
    load_weights(net, tensors, [("linear1", "ff.linear1"), ("linear1", "never.used")])
    assert torch.equal(net.ff["linear1"].weight, tensors["linear1.weight"])
    assert torch.equal(net.ff["linear10"].weight, tensors["ff.linear10.weight"])


def test_transpose_loads_tensors_stored_the_other_way() -> None:
    # GPT-2's Conv1D stores a Linear(d_in, d_out) weight as (d_in, d_out)
    net = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2))
    conv1d = {
        "0.weight": torch.randn(3, 5),
        "0.bias": torch.randn(5),
        "1.weight": torch.randn(5, 2),
        "1.bias": torch.randn(2),
    }
    load_weights(net, conv1d, transpose={"0.weight", "1.weight"})
    assert torch.equal(net[0].weight, conv1d["0.weight"].t()) and torch.equal(
        net[1].weight, conv1d["1.weight"].t()
    )
    assert torch.equal(net[0].bias, conv1d["0.bias"])
    x = torch.randn(4, 3)
    torch.testing.assert_close(
        net(x), (x @ conv1d["0.weight"] + conv1d["0.bias"]) @ conv1d["1.weight"] + conv1d["1.bias"]
    )
    with pytest.raises(
        ValueError,
        match=r"shape mismatch copying 0.weight into 0.weight: theirs \(3, 5\), ours \(5, 3\)",
    ):
        load_weights(net, conv1d, transpose={"1.weight"})  # one left out
    with pytest.raises(TypeError, match=r"positional argument"):  # transpose is keyword-only
        load_weights(net, conv1d, (), {"0.weight", "1.weight"})  # type: ignore[misc]


def test_transpose_names_are_theirs_before_renaming() -> None:
    net = nn.ModuleDict({"proj": nn.Linear(3, 5)})
    theirs = {"c_fc.weight": torch.randn(3, 5), "c_fc.bias": torch.randn(5)}
    load_weights(net, theirs, [("c_fc", "proj")], transpose={"c_fc.weight"})
    assert torch.equal(net["proj"].weight, theirs["c_fc.weight"].t())


# ---------------------------------------------------------------------------- split_in_proj


def test_split_in_proj_packed() -> None:
    ref = randomize_(nn.MultiheadAttention(D, H, batch_first=True))
    tensors = {f"attn.{k}": v for k, v in ref.named_parameters()}
    split = split_in_proj(tensors)
    assert sorted(split) == sorted(
        f"attn.{p}_proj.{kind}" for p in ("q", "k", "v", "out") for kind in ("weight", "bias")
    )
    for i, part in enumerate("qkv"):
        assert torch.equal(
            split[f"attn.{part}_proj.weight"], ref.in_proj_weight[i * D : (i + 1) * D]
        )
        assert torch.equal(split[f"attn.{part}_proj.bias"], ref.in_proj_bias[i * D : (i + 1) * D])
        assert split[f"attn.{part}_proj.weight"].shape == (D, D)
    assert (
        split["attn.out_proj.weight"] is tensors["attn.out_proj.weight"]
    )  # other names pass through
    # without a prefix, and the loaded module matches PyTorch
    ours = MultiHeadAttention(D, H)
    load_weights(ours, split_in_proj(dict(ref.named_parameters())))
    x = torch.randn(2, 5, D)
    torch.testing.assert_close(ours(x)[0], ref(x, x, x)[0], atol=1e-5, rtol=1e-5)


def test_split_in_proj_separate_q_k_v_proj_weight() -> None:
    ref = randomize_(nn.MultiheadAttention(D, H, kdim=KDIM, vdim=VDIM, batch_first=True))
    assert ref.in_proj_weight is None  # kdim != d_model: PyTorch keeps three weights
    split = split_in_proj(dict(ref.named_parameters()))
    assert split["q_proj.weight"] is ref.q_proj_weight and split["q_proj.weight"].shape == (D, D)
    assert split["k_proj.weight"] is ref.k_proj_weight and split["k_proj.weight"].shape == (D, KDIM)
    assert split["v_proj.weight"] is ref.v_proj_weight and split["v_proj.weight"].shape == (D, VDIM)
    assert torch.equal(split["k_proj.bias"], ref.in_proj_bias[D : 2 * D])  # the bias stays packed
    assert not any("in_proj" in name or name.endswith("_proj_weight") for name in split)
    ours = MultiHeadAttention(D, H, kdim=KDIM, vdim=VDIM)
    load_weights(ours, split)
    query, key, value = torch.randn(2, 5, D), torch.randn(2, 7, KDIM), torch.randn(2, 7, VDIM)
    torch.testing.assert_close(
        ours(query, key, value)[0], ref(query, key, value)[0], atol=1e-5, rtol=1e-5
    )


def test_split_in_proj_without_bias() -> None:
    ref = nn.MultiheadAttention(D, H, bias=False, batch_first=True)
    split = split_in_proj(dict(ref.named_parameters()))
    assert sorted(split) == ["k_proj.weight", "out_proj.weight", "q_proj.weight", "v_proj.weight"]
    load_weights(MultiHeadAttention(D, H, bias=False), split)
    with pytest.raises(
        ValueError,
        match=r"not written: \['k_proj.bias', 'out_proj.bias', 'q_proj.bias', 'v_proj.bias'\]",
    ):
        load_weights(MultiHeadAttention(D, H), split)
