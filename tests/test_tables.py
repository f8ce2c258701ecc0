import pandas as pd
import pytest

import attn_helpers as ah


def test_table_names_the_index_column_and_leaves_no_header_empty():
    frame = pd.DataFrame({"weight": [0.25, 0.75]}, index=pd.Index([16, 1024], name="d"))
    shown = ah.table(frame)
    html = shown._repr_html_()
    assert "<th></th>" not in html and "<th>d</th>" in html
    assert repr(shown).splitlines()[0].split() == ["d", "weight"]
    assert shown.frame is frame


def test_table_label_overrides_and_bad_input():
    frame = pd.DataFrame({"x": [1]}, index=["a"])
    assert repr(ah.table(frame, "word")).split()[:2] == ["word", "x"]
    with pytest.raises(ValueError, match="needs a header"):
        ah.table(frame)
    with pytest.raises(ValueError, match="already a column"):
        ah.table(frame, "x")
    with pytest.raises(TypeError, match="pandas DataFrame"):
        ah.table([[1, 2]], "row")
