"""One pre-LayerNorm transformer block built on the book's ``MultiHeadAttention`` (chapter 8).

``x = x + attention(LayerNorm(x))``, then ``x = x + MLP(LayerNorm(x))``, with the MLP
``Linear(d_model, d_ff) → ReLU → Linear(d_ff, d_model)``. This is what
``nn.TransformerEncoderLayer(norm_first=True, dropout=0.0, batch_first=True)`` computes, and
``copy_to_torch_encoder_layer`` moves the weights across so the two can be compared.
"""

from __future__ import annotations

import torch
from torch import nn

from . import validate
from .modules import MultiHeadAttention
from .torch_compat import copy_to_torch_mha

__all__ = ["TransformerBlock", "copy_to_torch_encoder_layer"]


class TransformerBlock(nn.Module):
    """A pre-LayerNorm block: attention and an MLP, each with a residual connection (chapter 8).

    ``forward(x, mask=None)`` takes ``(t, d_model)`` or ``(b, t, d_model)`` and returns the same shape;
    ``mask`` is as in ``MultiHeadAttention`` (bool, True = may attend). ``d_ff`` defaults to 4 · d_model.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int | None = None, eps: float = 1e-5):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, num_heads, bias=True)
        d_ff = 4 * d_model if d_ff is None else validate.integer(d_ff, "d_ff", minimum=1, why="the MLP's hidden width")
        self.d_model, self.d_ff = d_model, d_ff
        self.ln1 = nn.LayerNorm(d_model, eps=eps)
        self.ln2 = nn.LayerNorm(d_model, eps=eps)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask=mask)[0]  # (…, t, d_model): tokens exchange information
        return x + self.mlp(self.ln2(x))  # (…, t, d_model): each token on its own

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.attn.num_heads}, d_ff={self.d_ff}"


@torch.no_grad()
def copy_to_torch_encoder_layer(
    block: TransformerBlock, layer: nn.TransformerEncoderLayer
) -> nn.TransformerEncoderLayer:
    """Copy ``block``'s weights into ``layer`` (in place) and return it (chapter 8).

    ``layer`` must be a ``TransformerEncoderLayer`` of the same sizes, with ReLU, ``norm_first=True``
    and the same LayerNorm eps; its ``self_attn`` gets the attention weights (``copy_to_torch_mha``),
    ``linear1``/``linear2`` the MLP's, ``norm1``/``norm2`` the LayerNorms'.
    """
    if not isinstance(block, TransformerBlock):
        raise TypeError(f"expected an attn_helpers TransformerBlock, got {type(block).__name__}.")
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise TypeError(f"expected a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}.")
    if not layer.norm_first:
        raise ValueError("the layer was built with norm_first=False (post-LayerNorm); the book's block is "
                         "pre-LayerNorm, so build it with norm_first=True.")
    if getattr(layer, "activation_relu_or_gelu", 1) != 1:
        raise ValueError("the layer's activation is not ReLU; the book's MLP uses ReLU, so build the layer with "
                         "activation='relu' (the default).")
    if (layer.linear1.in_features, layer.linear1.out_features) != (block.d_model, block.d_ff):
        raise ValueError(
            f"sizes differ: the layer has d_model={layer.linear1.in_features}, dim_feedforward="
            f"{layer.linear1.out_features}; the block d_model={block.d_model}, d_ff={block.d_ff}."
        )
    if layer.norm1.eps != block.ln1.eps:
        raise ValueError(f"LayerNorm eps differs: {layer.norm1.eps} in the layer, {block.ln1.eps} in the block.")
    copy_to_torch_mha(block.attn, layer.self_attn)
    for src, dst in ((block.mlp[0], layer.linear1), (block.mlp[2], layer.linear2),
                     (block.ln1, layer.norm1), (block.ln2, layer.norm2)):
        dst.weight.copy_(src.weight)
        dst.bias.copy_(src.bias)
    return layer
