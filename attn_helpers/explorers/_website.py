"""How the website draws an explorer: a MyST-NB plugin (registered in pyproject.toml) for Vega-Lite outputs.

The page gets the specification in a JSON script tag, vega-embed's options (``EMBED_OPTIONS``, as JupyterLab gets
them) in the block's ``data-embed-options``, and a sentence for readers without JavaScript; ``_static/explorers.js``
draws it with the Vega libraries the site serves itself (``_ext/explorers.py``).
"""

from __future__ import annotations

import html
import json
from typing import Any

from ._explorer import EMBED_OPTIONS, MIME_TYPE

HTML_BUILDERS = ("html", "dirhtml", "singlehtml")


class VegaLiteOnPage:
    """MyST-NB's mime renderer plugin protocol: Vega-Lite above every other output type on HTML pages."""

    mime_priority_overrides = [(builder, MIME_TYPE, 5) for builder in HTML_BUILDERS]

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> list | None:
        if inline or data.mime_type != MIME_TYPE:
            return None
        from docutils import nodes

        spec = data.content if isinstance(data.content, dict) else json.loads(data.content)
        payload = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
        description = html.escape(spec.get("description", "An interactive figure."))
        options = html.escape(json.dumps(EMBED_OPTIONS, separators=(",", ":")), quote=True)
        page_html = (
            f'<div class="book-explorer" data-embed-options="{options}">'
            f'<script type="application/json">{payload}</script>'
            f'<p class="book-explorer-fallback">{description} (This interactive figure needs JavaScript.)</p>'
            "</div>"
        )
        return [nodes.raw("", page_html, format="html")]
