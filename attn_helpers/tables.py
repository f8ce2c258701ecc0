"""Tables for the page (every chapter): a pandas DataFrame whose index becomes an ordinary, named first column.

Jupyter shows a DataFrame's index under an empty header cell, which screen readers announce as a
column without a name. :func:`table` names that column instead (chapters 2, 3, 5 and 7).
:func:`weights_table` shows a ``(t_q, t_k)`` weight matrix that way, tokens on both axes (chapter 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from .validate import as_float_tensor

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Table", "table", "weights_table"]


class Table:
    """A DataFrame shown with its index as a named first column; ``.frame`` holds the DataFrame itself."""

    def __init__(self, frame: pd.DataFrame, index_label: str) -> None:
        self.frame = frame
        self.index_label = index_label

    def _shown(self) -> pd.DataFrame:
        return self.frame.rename_axis(self.index_label).reset_index()

    def _repr_html_(self) -> str:
        return self._shown().to_html(index=False, border=0, classes="dataframe")

    def __repr__(self) -> str:
        return self._shown().to_string(index=False)


def table(frame: pd.DataFrame, index_label: str | None = None) -> Table:
    """Wrap ``frame`` for display, its index shown as a first column headed ``index_label`` (chapter 2).

    ``index_label`` defaults to the index's own name; one of the two must be given.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"table takes a pandas DataFrame, got {type(frame).__name__}.")
    label = index_label if index_label is not None else frame.index.name
    if label is not None and not isinstance(label, str):
        raise TypeError(f"the index column's header (index_label or the index's name) must be a string, got {label!r}.")
    if not label or not label.strip():
        raise ValueError("the index column needs a header: pass index_label='...' or name the index first "
                         "(frame.rename_axis('...')).")
    if label in frame.columns:
        raise ValueError(f"index_label {label!r} is already a column name; choose another.")
    return Table(frame, label)


def weights_table(
    weights: torch.Tensor, tokens: Sequence[str], key_tokens: Sequence[str] | None = None, decimals: int = 2
) -> Table:
    """A ``(t_q, t_k)`` weight (or similarity) matrix as a table rounded to ``decimals`` (chapter 3).

    Rows are labelled with ``tokens`` (queries, in a first column headed "query"), columns with
    ``key_tokens`` (default: the same). The DataFrame itself is the result's ``.frame``.
    """
    import pandas as pd

    w = as_float_tensor(weights, "weights", min_dim=2)
    if w.dim() != 2:
        raise ValueError(f"weights_table shows one (t_q, t_k) matrix; got shape {tuple(w.shape)}. Pick one, e.g. W[0].")
    key_tokens = tokens if key_tokens is None else key_tokens
    if len(tokens) != w.shape[0] or len(key_tokens) != w.shape[1]:
        raise ValueError(
            f"{len(tokens)} row labels and {len(key_tokens)} column labels for a matrix of shape "
            f"{tuple(w.shape)}; give one label per row and per column."
        )
    frame = pd.DataFrame(w.detach().cpu().double().numpy(), index=list(tokens), columns=list(key_tokens))
    return table(frame.round(decimals), "query")
