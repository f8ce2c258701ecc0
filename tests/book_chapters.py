"""What the edition tests share: the chapters, chapter 1, and the MyST syntax that plain Jupyter and Colab show raw."""

import re
from pathlib import Path

import book_toc
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = book_toc.chapters()
CHAPTER_1 = ROOT / "chapters" / "01_weighted_average.ipynb"
by_name = pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
# MyST that plain Jupyter and Colab show raw: roles, directive fences, directive options, labelled math, targets.
MYST = re.compile(r"\{[a-z][a-z0-9_:-]*\}`|^\s*(`{3,}|:{3,})\{|^\s*:[a-z-]+:|\$\$\s*\([^)\s]+\)\s*$|^\([^)\s]+\)=\s*$",
                  re.MULTILINE)
