"""Citations and bibliography that agree: "(Vaswani et al., 2017)" in the text, "[Vaswani et al., 2017]" in the list.

Two styles are registered here and selected in _config.yml:

- ``author_year_round`` (``bibtex_reference_style``): sphinxcontrib-bibtex's ``author_year`` style with
  round brackets instead of square ones (the recipe from sphinxcontrib-bibtex's documentation), so the
  text reads "(Vaswani et al., 2017)" and "Bloem (2019)", as books usually print them.
- ``plain_author_year`` (``bibtex_default_style``): pybtex's ``plain`` formatting (entries sorted by
  author, year and title), but each entry of the bibliography page is labelled with the same author and
  year as its citations, where ``plain`` would number them [1], [2], ... which a reader cannot match
  with "(Vaswani et al., 2017)".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from string import ascii_lowercase

import pybtex.plugin
import sphinxcontrib.bibtex.plugin
from pybtex.database import Entry
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
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


def last_names(entry: Entry) -> list[str]:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    return [" ".join(p.prelast_names + p.last_names) for p in people]


def author_year(entry: Entry) -> str:
    """``Bloem, 2019``, ``Bloem and Rush, 2019`` or ``Vaswani et al., 2017``, as the in-text citations write them."""
    names = last_names(entry)
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels such as "Vaswani et al., 2017"; two works that would share one get "2017a", "2017b"."""

    def format_labels(self, sorted_entries: Iterable[Entry]) -> Iterator[str]:
        entries = list(sorted_entries)
        labels = [author_year(e) for e in entries]
        count, seen = Counter(labels), Counter()
        for label in labels:
            if count[label] > 1:
                suffix = ascii_lowercase[seen[label]]
                seen[label] += 1
                label += suffix
            yield label


class PlainAuthorYearStyle(PlainStyle):
    default_label_style = "author_year"


def setup(app: Sphinx) -> dict:
    sphinxcontrib.bibtex.plugin.register_plugin(
        "sphinxcontrib.bibtex.style.referencing", "author_year_round", RoundAuthorYearReferenceStyle, force=True)
    pybtex.plugin.register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle, force=True)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "plain_author_year", PlainAuthorYearStyle, force=True)
    return {"version": "1.1", "parallel_read_safe": True, "parallel_write_safe": True}
