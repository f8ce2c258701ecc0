"""Tables for the page: a pandas DataFrame whose index becomes an ordinary, named first column.

Jupyter shows a DataFrame's index under an empty header cell, which screen readers announce as a
column without a name. :func:`table` names that column instead (chapters 2, 3, 5 and 7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


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
    """Wrap ``frame`` for display, its index shown as a first column headed ``index_label``.

    ``index_label`` defaults to the index's own name; one of the two must be given.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"table takes a pandas DataFrame, got {type(frame).__name__}.")
    label = index_label if index_label is not None else frame.index.name
    if not isinstance(label, str) or not label.strip():
        raise ValueError("the index column needs a header: pass index_label='...' or name the index first "
                         "(frame.rename_axis('...')).")
    if label in frame.columns:
        raise ValueError(f"index_label {label!r} is already a column name; choose another.")
    return Table(frame, label)
