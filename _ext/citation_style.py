"""Citations in round brackets: "(Vaswani et al., 2017)" and "Bloem (2019)", as books usually print them.

sphinxcontrib-bibtex's ``author_year`` style uses square brackets; this registers the same style with
round ones as ``author_year_round`` (the recipe from sphinxcontrib-bibtex's documentation), which
_config.yml selects with ``bibtex_reference_style``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sphinxcontrib.bibtex.plugin
from sphinx.application import Sphinx
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle


def round_brackets() -> BracketStyle:
    return BracketStyle(left="(", right=")")


@dataclass
class RoundAuthorYearReferenceStyle(AuthorYearReferenceStyle):
    bracket_parenthetical: BracketStyle = field(default_factory=round_brackets)
    bracket_textual: BracketStyle = field(default_factory=round_brackets)
    bracket_author: BracketStyle = field(default_factory=round_brackets)
    bracket_label: BracketStyle = field(default_factory=round_brackets)
    bracket_year: BracketStyle = field(default_factory=round_brackets)


def setup(app: Sphinx) -> dict:
    sphinxcontrib.bibtex.plugin.register_plugin(
        "sphinxcontrib.bibtex.style.referencing", "author_year_round", RoundAuthorYearReferenceStyle, force=True)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
