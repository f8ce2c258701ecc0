"""_ext/static_files.py: an edited static or extra file reaches the built site when no page changed."""

import os
from pathlib import Path

from sphinx.application import Sphinx

CONF = """extensions = ["static_files"]  # from _ext/, which pyproject.toml puts on the tests' path
html_static_path = ["_static"]
html_extra_path = ["_extra"]
"""


def build(src: Path) -> None:
    """An incremental HTML build of src into src/_build, as `make book` and `make build-strict` do."""
    out = src / "_build"
    Sphinx(src, src, out, out / ".doctrees", "html", status=None, warning=None, freshenv=False).build()


def test_an_edited_static_or_extra_file_is_copied_without_any_page_change(tmp_path):
    (tmp_path / "conf.py").write_text(CONF)
    (tmp_path / "index.rst").write_text("Title\n=====\n\nText.\n")
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "site.css").write_text("body { color: black; }\n")
    (tmp_path / "_static" / ".site.css.swp").write_text("an editor's swap file")  # hidden: Sphinx never copies it
    (tmp_path / "_static" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "_static" / ".ipynb_checkpoints" / "site-checkpoint.css").write_text("body {}\n")
    (tmp_path / "_extra").mkdir()
    (tmp_path / "_extra" / "robots.txt").write_text("User-agent: *\n")
    build(tmp_path)
    page = tmp_path / "_build" / "index.html"
    later = page.stat().st_mtime + 3600
    os.utime(page, (later, later))  # a page written again gets the time of writing instead

    build(tmp_path)  # nothing changed (the hidden files are not the site's): no page is written again
    assert page.stat().st_mtime == later

    (tmp_path / "_static" / "site.css").write_text("body { color: navy; }\n")
    (tmp_path / "_extra" / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    build(tmp_path)
    assert (tmp_path / "_build" / "_static" / "site.css").read_text() == "body { color: navy; }\n"
    assert (tmp_path / "_build" / "robots.txt").read_text() == "User-agent: *\nDisallow:\n"
