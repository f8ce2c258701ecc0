"""Small changes to the HTML the site's readers get: full-size figures, and a bibliography screen readers accept.

- **A click on a figure opens the full-size image.** A figure is shown at the width of the text column
  (about 740 px on a desktop, 360 px on a phone); each figure image, and each image a code cell shows,
  is wrapped in a link to its file in ``_images/`` (as Sphinx itself does for images given a size), so a
  reader can open it at full size and zoom. The link's accessible name is the image's alt text.
- **The bibliography is a list of list items.** Docutils writes a list of citations as
  ``<div role="list">`` holding ``<div role="doc-biblioentry">``. ``doc-biblioentry`` is deprecated
  in DPUB-ARIA 1.1 and is not a ``listitem`` to assistive technology, so axe-core reports the list as
  critical (``aria-required-children``: a list without items). The entries get ``role="listitem"``.

Search-result snippets are made readable in the browser, by ``_static/search_snippets.js``: Sphinx builds
them from the text of each page's HTML, where formulas are still TeX source until MathJax typesets them.
"""

from __future__ import annotations

import posixpath
from urllib.parse import quote

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.osutil import relative_uri

FIGURE_LINK_CLASS = "figure-image-link"


def shows_a_figure(image: nodes.image) -> bool:
    """True for an image inside a figure or in a code cell's output (myst-nb's ``cell_output`` container)."""
    parent = image.parent
    while parent is not None:
        if isinstance(parent, nodes.figure) or "cell_output" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


class LinkFiguresToFullSize(SphinxPostTransform):
    """Wrap each figure image in a link to the image file the builder copies to ``_images/``."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        images_dir = relative_uri(self.app.builder.get_target_uri(self.env.docname), self.app.builder.imagedir)
        for image in list(self.document.findall(nodes.image)):
            if isinstance(image.parent, nodes.reference) or not shows_a_figure(image):
                continue
            known = self.env.images.get(image["uri"])  # (documents, the file's unique name in _images/)
            if known is None:
                continue  # a remote or unknown image: nothing to link to
            link = nodes.reference("", "", internal=True, classes=[FIGURE_LINK_CLASS],
                                   refuri=posixpath.join(images_dir, quote(known[1])))
            image.replace_self(link)
            link.append(image)


def listitem_citations(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Give the entries of a citation list (the bibliography) the role list items have."""
    body = context.get("body")
    if body and 'class="citation-list"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


def setup(app: Sphinx) -> dict:
    app.add_post_transform(LinkFiguresToFullSize)
    app.connect("html-page-context", listitem_citations)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
