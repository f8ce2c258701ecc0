"""attn_helpers.explorers: the output every explorer is, and the website's plugin that draws it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import altair as alt
import pandas as pd
import pytest
import torch

import attn_helpers as ah
from attn_helpers.explorers import MIME_TYPE, Explorer, rounded
from attn_helpers.explorers._website import VegaLiteOnPage

SCORES = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
LABELS = [f"key {i}" for i in range(1, 6)]


def small_chart() -> alt.Chart:
    return alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_bar().encode(x="x:Q")


def test_an_explorer_is_vega_lite_with_a_description_and_svg_options():
    data, metadata = Explorer(small_chart(), "Two bars.")._repr_mimebundle_()
    assert data[MIME_TYPE]["description"] == "Two bars." and data[MIME_TYPE]["$schema"].endswith("/v5.20.1.json")
    assert data["text/plain"] == "Explorer: Two bars."
    assert metadata[MIME_TYPE]["embed_options"] == {"renderer": "svg", "actions": False}


def test_an_explorer_needs_a_chart_and_a_description():
    with pytest.raises(TypeError, match="Altair chart"):
        Explorer({"mark": "bar"}, "Two bars.")
    with pytest.raises(ValueError, match="description"):
        Explorer(small_chart(), " ")


def test_rounded_keeps_eight_significant_digits():
    assert rounded(0.123456789123) == 0.12345679 and rounded(-1234.5678912) == -1234.5679
    assert rounded(0.0) == 0.0 and rounded(3e-17) == 3e-17
    with pytest.raises(ValueError, match="finite"):
        rounded(float("nan"))


def test_the_same_input_gives_the_same_specification():
    """nbval compares the explorers' data: building one twice in a kernel must not rename anything."""
    one = ah.explorers.temperature_explorer(SCORES, LABELS).spec()
    two = ah.explorers.temperature_explorer(SCORES, LABELS).spec()
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)


def test_temperature_view_is_the_softmax_at_that_temperature():
    view = ah.explorers.temperature_view(SCORES, 2.0)
    assert view["weights"] == pytest.approx(torch.softmax(SCORES / 2, -1).tolist())
    assert view["largest"] == pytest.approx(max(view["weights"]))
    assert view["entropy"] == pytest.approx(float(ah.scaling.entropy(torch.tensor(view["weights"]))))


def test_temperature_explorer_checks_its_input():
    with pytest.raises(ValueError, match="temperature"):
        ah.explorers.temperature_explorer(SCORES, LABELS, temperature=0)
    with pytest.raises(ValueError, match="t labels"):
        ah.explorers.temperature_explorer(SCORES, LABELS[:3])


def test_the_website_plugin_writes_the_spec_and_a_fallback_sentence():
    spec = {"description": "Bars </script><b>", "mark": "bar"}
    (node,) = VegaLiteOnPage.handle_mime(None, SimpleNamespace(mime_type=MIME_TYPE, content=spec), inline=False)
    html = node.astext()
    assert html.startswith('<div class="book-explorer"><script type="application/json">')
    assert "</script><b>" not in html.split("</script>", 1)[0]  # a "</" in the spec cannot end the script early
    assert "Bars &lt;/script&gt;&lt;b&gt; (This interactive figure needs JavaScript.)" in html
    assert VegaLiteOnPage.handle_mime(None, SimpleNamespace(mime_type="text/html", content=""), inline=False) is None
    assert ("html", MIME_TYPE, 5) in VegaLiteOnPage.mime_priority_overrides
