"""Keep each page's scripts to what it uses: drop sphinx-thebe's when thebe (live code) is not enabled.

Jupyter Book always loads the sphinx-thebe extension, and with Sphinx 7 its configuration script
lands twice on every page, so the browser reports "Identifier 'THEBE_JS_URL' has already been
declared" and the page starts with a JavaScript error. The book does not enable thebe
(launch_buttons: thebe is off; readers run chapters on Binder, Colab or a JupyterHub instead), so
those scripts and their stylesheet are left out.
"""

from __future__ import annotations

from sphinx.application import Sphinx


def thebe_enabled(app: Sphinx) -> bool:
    return bool((app.config.html_theme_options or {}).get("launch_buttons", {}).get("thebe"))


def is_thebe_asset(asset: object) -> bool:
    filename = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "")
    return "sphinx-thebe" in filename or "THEBE_JS_URL" in body


def drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    if thebe_enabled(app):
        return
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not is_thebe_asset(asset)]


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", drop_thebe, priority=900)  # after the extensions that add assets
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
