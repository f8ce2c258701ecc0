"""attn_helpers: the code the chapters of *Self-attention from scratch* share, cut by idea.
One module per idea a chapter introduces holds its math, its figures and its input checks (``ah.scaling``, ``ah.cost``);
a few modules serve every chapter: ``plotting`` (the heatmap style), ``tables``, ``validate`` and ``checks``.

The top level holds only the core a reader calls (listed in ``__all__``); everything else lives in its
module, e.g. ``ah.scaling.entropy`` or ``ah.cost.measure_time``. Modules are imported on first use
(PEP 562), so ``import attn_helpers`` costs little more than ``import torch``: matplotlib, seaborn,
pandas, ipywidgets and the exercise checks load only when a figure, table, widget or check needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .attention import attention, loop_attention, softmax
from .glove import GloVe, cosine_similarity, tokenize
from .masks import causal_mask, padding_mask
from .modules import MultiHeadAttention, SelfAttentionHead
from .tables import table

if TYPE_CHECKING:
    from .plotting import plot_attention, plot_heads

__all__ = [
    "attention", "softmax",  # chapters 1-2
    "GloVe", "tokenize", "cosine_similarity",  # chapter 3
    "SelfAttentionHead", "MultiHeadAttention",  # chapters 4-5
    "causal_mask", "padding_mask", "loop_attention",  # chapter 7
    "plot_attention", "plot_heads", "table",  # figures and tables, chapter 1 on
]

# public modules, imported on first attribute access
_MODULES = (
    "blocks", "checks", "circuits", "cost", "depth", "download", "explore", "explorers", "extrapolation", "flash",
    "glove", "heads_task", "induction", "inference", "language_model", "latent", "layout", "linear_attention",
    "lm_heads", "long_context", "masks", "merge", "modules", "null_attention", "plotting", "position", "scaling",
    "sliding_window", "speculative", "tables", "tasks", "text", "torch_compat", "traffic", "training", "validate",
)
_LAZY = {"plot_attention": "plotting", "plot_heads": "plotting"}  # top-level names from heavy modules


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in _MODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; the top level holds "
                             f"{', '.join(__all__)}, "
                             f"the rest is in its module (dir(attn_helpers) lists them).")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_MODULES])
