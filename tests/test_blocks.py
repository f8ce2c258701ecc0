"""Tests for attn_helpers.blocks: the pre-LayerNorm block against nn.TransformerEncoderLayer (chapter 8)."""

import pytest
import torch
from messages import POSITIVE_INTEGER, raises_saying
from torch import nn

import attn_helpers as ah
from attn_helpers import blocks


def _pair(d=12, h=3, d_ff=20):
    torch.manual_seed(0)
    block = blocks.TransformerBlock(d, h, d_ff).double()
    layer = nn.TransformerEncoderLayer(d, h, dim_feedforward=d_ff, dropout=0.0, batch_first=True,
                                       norm_first=True).double()
    return block, blocks.copy_to_torch_encoder_layer(block, layer)


def test_block_matches_torch_encoder_layer():
    block, layer = _pair()
    x = torch.randn(2, 5, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    causal = ah.causal_mask(5)
    with torch.no_grad():
        assert (block(x) - layer(x)).abs().max() < 1e-10
        blocked = ah.masks.convert_mask(causal, "allowed", "blocked")
        assert (block(x, mask=causal) - layer(x, src_mask=blocked)).abs().max() < 1e-10
        assert block(x[0]).shape == (5, 12)                 # one unbatched sequence


def test_block_shapes_and_default_width():
    block = blocks.TransformerBlock(8, 2)
    assert block.d_ff == 32 and block(torch.randn(3, 4, 8)).shape == (3, 4, 8)
    assert "d_ff=32" in repr(block)


@pytest.mark.parametrize("make, error, message", [
    (lambda: (blocks.TransformerBlock(12, 3, 20), nn.TransformerEncoderLayer(12, 3, 20, norm_first=False)),
     ValueError, "norm_first=True"),
    (lambda: (blocks.TransformerBlock(12, 3, 20), nn.TransformerEncoderLayer(12, 3, 24, norm_first=True)),
     ValueError, "sizes differ"),
    (lambda: (blocks.TransformerBlock(12, 3, 20), nn.TransformerEncoderLayer(12, 3, 20, norm_first=True,
                                                                           activation="gelu")),
     ValueError, "not ReLU"),
    (lambda: (blocks.TransformerBlock(12, 3, 20), nn.TransformerEncoderLayer(12, 3, 20, norm_first=True,
                                                                           layer_norm_eps=1e-6)),
     ValueError, "eps differs"),
    (lambda: (ah.MultiHeadAttention(12, 3), nn.TransformerEncoderLayer(12, 3, 20, norm_first=True)),
     TypeError, "TransformerBlock"),
    (lambda: (blocks.TransformerBlock(12, 3, 20), nn.Linear(2, 2)), TypeError, "TransformerEncoderLayer"),
])
def test_copy_rejects_mismatched_layers(make, error, message):
    block, layer = make()
    with pytest.raises(error, match=message):
        blocks.copy_to_torch_encoder_layer(block, layer)


def test_bad_d_ff():
    with raises_saying(ValueError, "d_ff " + POSITIVE_INTEGER):
        blocks.TransformerBlock(8, 2, d_ff=0)
