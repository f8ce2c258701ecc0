"""Launch buttons for real addresses only: a JupyterHub button appears when a hub is configured.

The theme (sphinx-book-theme) shows a launch button for every ``*_url`` set under ``launch_buttons`` in
_config.yml. Binder and Colab are public services, so the book sets them there. A JupyterHub belongs to
a course or an institution, so the book sets none, and that button is absent. A course that builds its
own copy of the site gives its hub's address for one build, without editing _config.yml:

    BOOK_JUPYTERHUB_URL=https://hub.example.edu make book

(the button then opens the chapter on that hub through nbgitpuller). A launch address that is not an
https URL, or whose host is a reserved placeholder (example.org, *.test, *.invalid, localhost: RFC 2606),
stops the build with an error, so a placeholder can never again give readers a dead button.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

ENV_JUPYTERHUB = "BOOK_JUPYTERHUB_URL"
URL_KEYS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url", "jupyterlite_url")
PLACEHOLDER_DOMAINS = ("example.com", "example.org", "example.net")
PLACEHOLDER_TLDS = (".example", ".test", ".invalid", ".localhost", ".local")


def placeholder_problem(key: str, url: str) -> str | None:
    """Why ``url`` cannot be a launch address that readers follow, or None when it can."""
    parts = urlsplit(url)
    if key == "jupyterlite_url" and not parts.netloc:
        return None  # JupyterLite may be served from this site itself (a path)
    if parts.scheme != "https" or not parts.hostname:
        return f"{key}: {url!r} is not an https:// address"
    host = parts.hostname.lower()
    if host == "localhost" or host.endswith(PLACEHOLDER_TLDS) or any(
            host == d or host.endswith("." + d) for d in PLACEHOLDER_DOMAINS):
        return f"{key}: {url!r} is a placeholder (reserved host {host}), not a real service"
    return None


def configure(app: Sphinx, config: Config) -> None:
    """Apply $BOOK_JUPYTERHUB_URL, drop empty addresses, and refuse placeholders."""
    options = config.html_theme_options or {}
    buttons = dict(options.get("launch_buttons") or {})
    hub = os.environ.get(ENV_JUPYTERHUB, "").strip()
    if hub:
        buttons["jupyterhub_url"] = hub
    for key in URL_KEYS:
        if key in buttons and not str(buttons[key] or "").strip():
            del buttons[key]  # an empty address means "no button"
    problems = [p for key in URL_KEYS if key in buttons if (p := placeholder_problem(key, str(buttons[key])))]
    if problems:
        raise ConfigError("Launch buttons must point to real services: " + "; ".join(problems)
                          + f". Remove the line from launch_buttons in _config.yml (or for a JupyterHub, set "
                          f"${ENV_JUPYTERHUB} to your hub's address).")
    config.html_theme_options = {**options, "launch_buttons": buttons}


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", configure, priority=100)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
