"""attn_helpers.explorers: the output every explorer is, and the website's plugin that draws it."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import altair as alt
import pandas as pd
import pytest
import torch

import attn_helpers as ah
from attn_helpers.explorers import MIME_TYPE, Explorer, rounded
from attn_helpers.explorers._explorer import CAPTION_MAX, EMBED_OPTIONS, FONT_SIZE, INK
from attn_helpers.explorers._website import VegaLiteOnPage

SCORES = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
LABELS = [f"key {i}" for i in range(1, 6)]


def small_chart() -> alt.Chart:
    return alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_bar().encode(x="x:Q")


def test_an_explorer_is_vega_lite_with_a_description_a_caption_and_svg_options():
    data, metadata = Explorer(small_chart(), "Two bars.", "Watch the bars")._repr_mimebundle_()
    assert data[MIME_TYPE]["description"] == "Two bars." and data[MIME_TYPE]["$schema"].endswith("/v5.20.1.json")
    assert data[MIME_TYPE]["title"]["text"] == "Watch the bars" and data[MIME_TYPE]["title"]["anchor"] == "start"
    assert data["text/plain"] == "Explorer: Two bars."
    assert metadata[MIME_TYPE]["embed_options"] == EMBED_OPTIONS == {"renderer": "svg", "actions": False}


def test_the_website_and_jupyterlab_draw_with_the_same_embed_options():
    """One source: the page carries EMBED_OPTIONS (the mimebundle's) and explorers.js draws with them, not its own."""
    (node,) = VegaLiteOnPage.handle_mime(None, SimpleNamespace(mime_type=MIME_TYPE, content={"mark": "bar"}),
                                         inline=False)
    written = re.search(r'data-embed-options="([^"]*)"', node.astext())[1]
    assert json.loads(html.unescape(written)) == EMBED_OPTIONS
    script = (Path(__file__).parent.parent / "_static" / "explorers.js").read_text()
    (call,) = re.findall(r"vegaEmbed\(([^;]*)\);", script)
    assert call == "view, spec, JSON.parse(block.dataset.embedOptions)", (
        f"explorers.js must draw with the options the page carries (EMBED_OPTIONS), not its own: vegaEmbed({call})")


def test_an_explorer_needs_a_chart_a_description_and_a_one_line_caption():
    with pytest.raises(TypeError, match="Altair chart"):
        Explorer({"mark": "bar"}, "Two bars.", "Watch the bars")
    with pytest.raises(ValueError, match="description"):
        Explorer(small_chart(), " ", "Watch the bars")
    for caption in ("", "Watch\nthe bars", "x" * (CAPTION_MAX + 1)):
        with pytest.raises(ValueError, match="one line"):
            Explorer(small_chart(), "Two bars.", caption)


def test_every_explorer_has_a_caption_its_text_size_and_ink_that_follows_the_page():
    """The shared parts (issue 49, item 6): a caption at the chart, 12-px axes and legends (the website draws them
    at the page's 16 px where there is room), and the INK style the website's dark pages recolour."""
    spec = ah.explorers.temperature_explorer(SCORES, LABELS).spec()
    assert spec["title"]["text"] == "Slide T: low T sharpens, high T flattens"
    assert {k: spec["config"]["axis"][k] for k in ("labelFontSize", "titleFontSize")} == {
        "labelFontSize": FONT_SIZE, "titleFontSize": FONT_SIZE}
    assert spec["config"]["legend"] == {"labelFontSize": FONT_SIZE, "titleFontSize": FONT_SIZE}
    assert spec["config"]["style"][INK] == {"stroke": "black", "fill": "black"}
    # its own light colours, which JupyterLab's dark theme does not override (tests/test_lab_browser.py)
    assert spec["config"]["background"] == "white" and spec["config"]["title"]["color"] == "black"
    assert spec["config"]["style"]["guide-label"] == spec["config"]["style"]["guide-title"] == {"fill": "black"}


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
    assert view["uniform"] == 0.2 and view["uniform_entropy"] == pytest.approx(math.log(5))
    assert view["largest"] == pytest.approx(max(view["weights"]))
    assert view["entropy"] == pytest.approx(float(ah.scaling.entropy(torch.tensor(view["weights"]))))


def test_the_temperature_explorer_holds_the_scores_a_log_slider_and_its_marks():
    spec = ah.explorers.temperature_explorer(SCORES, LABELS, temperature=2.0, d=8).spec()
    params = {p["name"]: p for p in spec["params"]}
    slider = params["log10_T"]
    assert (slider["bind"]["min"], slider["bind"]["max"]) == (-1, 1) and slider["value"] == rounded(math.log10(2))
    assert params["key_scores"]["value"] == dict(zip(LABELS, SCORES.tolist(), strict=True))
    data = json.dumps(spec["datasets"])
    assert '"T": 2.8284271' in data and '"u": 0.2' in data and '"entropy": 1.6094379' in data  # √8, 1/5, ln 5
    no_d = json.dumps(ah.explorers.temperature_explorer(SCORES, LABELS, temperature=2.0).spec()["datasets"])
    assert '"T": 2.8284271' not in no_d


def test_temperature_explorer_checks_its_input():
    with pytest.raises(ValueError, match="temperature"):
        ah.explorers.temperature_explorer(SCORES, LABELS, temperature=0)
    with pytest.raises(ValueError, match="slider's range"):
        ah.explorers.temperature_explorer(SCORES, LABELS, temperature=20)
    with pytest.raises(ValueError, match="d"):
        ah.explorers.temperature_explorer(SCORES, LABELS, d=101)
    with pytest.raises(ValueError, match="t labels"):
        ah.explorers.temperature_explorer(SCORES, LABELS[:3])


def test_the_website_plugin_writes_the_spec_and_a_fallback_sentence():
    spec = {"description": "Bars </script><b>", "mark": "bar"}
    (node,) = VegaLiteOnPage.handle_mime(None, SimpleNamespace(mime_type=MIME_TYPE, content=spec), inline=False)
    page = node.astext()
    assert page.startswith('<div class="book-explorer" data-embed-options="{&quot;renderer&quot;:&quot;svg&quot;,'
                           '&quot;actions&quot;:false}"><script type="application/json">')
    assert "</script><b>" not in page.split("</script>", 1)[0]  # a "</" in the spec cannot end the script early
    assert "Bars &lt;/script&gt;&lt;b&gt; (This interactive figure needs JavaScript.)" in page
    assert VegaLiteOnPage.handle_mime(None, SimpleNamespace(mime_type="text/html", content=""), inline=False) is None
    assert ("html", MIME_TYPE, 5) in VegaLiteOnPage.mime_priority_overrides


def test_check_labels_names_the_limit_the_counts_and_the_cut():
    from attn_helpers.explorers._explorer import check_labels

    check_labels(3, ["a", "b", "c"], 8, "scores of shape (t, t)", "")  # fits: no error
    check_labels(2, [["a", "b"], ["c", "d"]], 8, "weights", "")
    with pytest.raises(ValueError, match=r"need scores of shape \(t, t\) with t <= 8 \(more does not fit a phone\) "
                                         r"and t tokens; got t = 9 and 9 tokens\. Take the first 8\."):
        check_labels(9, list("abcdefghi"), 8, "scores of shape (t, t)", "Take the first 8.", name="tokens")
    with pytest.raises(ValueError, match=r"t labels; got t = 3 and 2 labels"):
        check_labels(3, ["a", "b"], 8, "scores", "")
    with pytest.raises(ValueError, match=r"t labels for each; got t = 2 and \[2, 1\] labels"):
        check_labels(2, [["a", "b"], ["c"]], 8, "weights", "")


def test_vega_softmax_masks_keys_and_zeroes_a_row_with_none_left():
    from attn_helpers.explorers._explorer import vega_softmax

    plain, masked = vega_softmax("datum.s", by=()), vega_softmax("datum.x / T", by=("q",), allowed="datum.k < real")
    assert plain[0] == {"calculate": "true", "as": "allowed"}  # no s to compute: the data hold it
    assert masked[0] == {"calculate": "datum.x / T", "as": "s"} and masked[1]["calculate"] == "datum.k < real"
    assert [t.get("groupby") for t in masked if "joinaggregate" in t] == [["q"], ["q"]]
    assert masked[-1] == {"calculate": "datum.open > 0 ? datum.e / datum.total : 0", "as": "w"}
