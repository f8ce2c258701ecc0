"""Turn a chapter's MyST markdown into plain Markdown that JupyterLab renders as the website does.

The website (Jupyter Book, myst-nb, sphinx-exercise) resolves glued values, cross-references, citations
and directives; plain Jupyter shows them raw. ``ChapterText.of(nb, path)`` collects what resolving needs
from one chapter: the numbers of its figures, equations and exercises (book_editions/numbering.py), its glued
values (the ``display_data`` outputs that ``myst_nb.glue`` recorded, metadata ``scrapbook``) and the
citations' authors and years (references.bib).

``ChapterText.plain(source)`` then rewrites one markdown cell. ``ROLES`` and ``DIRECTIVES`` below are the
MyST the editions support, each name with the function that writes its plain form:

    {glue:text}`name:.4f`, {glue}`name`    the glued value, formatted as myst-nb formats it
    {eq}`label`                             (1.3)   (the text around it says "equation")
    {numref}`label`                         Figure 1.1, Exercise 6.3 (also in another chapter)
    {ref}`label`                            the same number, or a section's title
    {doc}`path`                             the page's title
    {cite:p}`key` / {cite:t}`key`           (Vaswani et al., 2017) / Vaswani et al. (2017)
    {sub}, {sup}, {kbd}, {abbr}, {term}     HTML tags or the plain word
    ```{exercise} Title (medium)            ### Exercise 1.2 (medium): Title   (exercise_cells.EXERCISE_HEADING)
    ```{note}, {dropdown}, {margin}, ...     a block quote headed **Note** (or by its title)
    ```{math} with :label:                  $$\\begin{equation*} ... \\tag{1.2} \\end{equation*}$$
    $$ ... $$ (label)                       $$\\begin{equation*} ... \\tag{1.1} \\end{equation*}$$
    $$ ... $$                               $$\\begin{equation*} ... \\end{equation*}$$
    (label)=                                removed

Every display equation is an ``equation*``: its number is its ``\\tag``, as on the website, and an unnumbered
one stays unnumbered, in MathJax and KaTeX (JupyterLab, Notebook 7, Colab, VS Code) as in jupyterlab-myst,
which would otherwise number each ``$$`` block again, "(1.1) (1)" (it reads ``equation*`` as not numbered).

A role or directive not in the tables raises ``MystError`` naming it and the table, so a new one in a chapter
fails loudly (tests/test_make_student.py runs this over every chapter) instead of reaching students raw. The
gates of a solution, ``{solution-start}`` and ``{solution-end}``, are not in the table: an edition's gate step
takes them out before its ``ResolveMyst`` (book_editions/steps.py states the rule).
Used by the editions (book_editions/steps.py, book_editions/chapter.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from book_toc import ROOT

from .exercise_cells import WORDS_MARKER_RE, exercise_heading, shown_label
from .myst_syntax import FENCE_RE, MATH_LABEL_RE, ROLE_RE, TARGET_RE, MystError, closing, myst_left, options
from .numbering import Target, book_targets, chapter_number, exercise_number, number_targets

GLUE_MIME = "application/papermill.record/"
# What the website calls each kind of numbered thing. The website writes "Fig. 1.1"; a sentence reads better
# with the whole word, and "Figure 1.1" is unambiguous on its own.
KIND_NAMES = {"figure": "Figure", "equation": "", "exercise": "Exercise"}
GATES = ("solution-start", "solution-end")
HERE = "scripts/book_editions/plain_markdown.py"
DISPLAY_MATH_RE = re.compile(r"\$\$(?P<body>.+?)\$\$", re.DOTALL)


def _unnumbered(m: re.Match) -> str:
    """A display equation as ``equation*`` (see the module's docstring), its lines and their quoting kept."""
    body = m.group("body")
    return m.group(0) if "\\begin{equation" in body else f"$$\\begin{{equation*}}{body}\\end{{equation*}}$$"


@dataclass
class ChapterText:
    """What resolving one chapter's MyST needs: numbers, glued values and citations."""

    name: str                                   # the chapter's file name, for error messages
    chapter: int
    targets: dict[str, Target] = field(default_factory=dict)
    glued: dict[str, dict] = field(default_factory=dict)   # name -> {mime type: value}
    citations: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (authors, year)

    path: Path | None = None                    # the chapter's file, for {doc} links
    root: Path = ROOT                           # the book, for references to other chapters

    @classmethod
    def of(cls, nb: nbformat.NotebookNode, path: Path, root: Path = ROOT) -> ChapterText:
        """Collect the targets, glued values and citations of chapter ``nb`` read from ``path``."""
        text = cls(Path(path).name, chapter_number(path, root), path=Path(path), root=Path(root))
        text.targets = number_targets(nb, text.chapter, text.name)
        for cell in nb.cells:
            for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
                name = out.get("metadata", {}).get("scrapbook", {}).get("name")
                if out.output_type == "display_data" and name:
                    text.glued[name] = {k.removeprefix(GLUE_MIME): v for k, v in out.data.items()}
        text.citations = read_bib(root / "references.bib")
        return text

    def exercise_number(self, label: str | None) -> str:
        """The number, "1.2", of this chapter's exercise ``label`` (book_editions/numbering.py)."""
        return exercise_number(self.targets, label, self.name)

    def target(self, label: str, role: str, content: str) -> Target:
        """The figure, equation, exercise or section ``label`` names, in this chapter or another."""
        found = self.targets.get(label) or book_targets(str(self.root)).get(label)
        if found is None:
            raise MystError(f"{self.name}: {{{role}}}`{content}` points to no figure, equation, exercise or "
                            f"labelled section of the book's chapters")
        return found

    def role(self, role: str, content: str) -> str:
        """The plain text that the website shows for ``{role}`content``` (``ROLES``)."""
        if role not in ROLES:
            raise MystError(f"{self.name}: the role {{{role}}} has no plain-Markdown form; add one to ROLES in "
                            f"{HERE} (it has {', '.join(sorted(ROLES))})")
        return ROLES[role](self, role, content)

    def directive(self, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
        """The plain-Markdown lines for a ``{name}`` directive (``DIRECTIVES``), its body resolved already."""
        if name in GATES:
            raise MystError(f"{self.name}: the gate {{{name}}} reached ResolveMyst: in the edition's list of steps, "
                            "a gate step (FoldSolution, DropGated) must come before ResolveMyst "
                            "(scripts/book_editions/steps.py)")
        if name not in DIRECTIVES:
            raise MystError(f"{self.name}: the directive {{{name}}} has no plain-Markdown form; add one to "
                            f"DIRECTIVES in {HERE} (it has {', '.join(sorted(DIRECTIVES))})")
        while body and not body[0].strip():
            body = body[1:]
        while body and not body[-1].strip():
            body = body[:-1]
        return DIRECTIVES[name](self, name, arg, opts, body, indent)

    def glue(self, content: str, role: str = "glue:text") -> str:
        """A glued value as the website shows it: myst-nb's own formatting of its text form."""
        from myst_nb.core.variables import format_plain_text

        name, spec = content.rsplit(":", 1) if ":" in content else (content, "")
        if name not in self.glued:
            raise MystError(f"{self.name}: {{{role}}}`{content}`: no cell glues {name!r}; run the chapter "
                            f"(make refresh) so its outputs hold the glued values")
        data = self.glued[name]
        if role == "glue:md" and "text/markdown" in data:
            return _text(data["text/markdown"])
        if "text/plain" not in data:
            raise MystError(f"{self.name}: the glued value {name!r} has no text form ({sorted(data)})")
        return format_plain_text(_text(data["text/plain"]), spec or ("s" if role == "glue:text" else ""))

    def doc_title(self, content: str) -> str:
        """``{doc}`path``` as the website shows it: the explicit title, else the page's first heading."""
        title, target = _explicit_title(content)
        if title:
            return title
        base = self.root if target.startswith("/") else (self.path.parent if self.path else self.root)
        for suffix in (".ipynb", ".md"):
            page = base / f"{target.lstrip('/')}{suffix}"
            if page.is_file():
                if suffix == ".ipynb":
                    sources = [c.source for c in nbformat.read(page, as_version=4).cells if c.cell_type == "markdown"]
                else:
                    sources = [page.read_text(encoding="utf-8")]
                for line in "\n".join(sources).splitlines():
                    if line.startswith("# "):
                        return line[2:].strip()
        raise MystError(f"{self.name}: {{doc}}`{content}`: no page {target}.ipynb or {target}.md with a '# ' title")

    def cite(self, role: str, content: str) -> str:
        keys = [k.strip() for k in content.split(",") if k.strip()]
        missing = [k for k in keys if k not in self.citations]
        if missing:
            raise MystError(f"{self.name}: {{{role}}}`{content}`: {missing} not in references.bib")
        if role in ("cite:t", "cite:ts"):
            return "; ".join(f"{self.citations[k][0]} ({self.citations[k][1]})" for k in keys)
        # as sphinxcontrib-bibtex writes several: in the bibliography's order, "(Dao, 2023, Dao et al., 2022)"
        ordered = sorted(keys, key=list(self.citations).index)
        return "(" + ", ".join(f"{self.citations[k][0]}, {self.citations[k][1]}" for k in ordered) + ")"

    # --- a whole cell ----------------------------------------------------------------------------
    def plain(self, source: str) -> str:
        """``source`` (one markdown cell) with every role and directive resolved to plain Markdown."""
        lines = self._blocks(WORDS_MARKER_RE.sub("", source).splitlines())  # an author's marker (exercise_cells.py)
        return DISPLAY_MATH_RE.sub(_unnumbered, ROLE_RE.sub(self._resolve, "\n".join(lines)))

    def _resolve(self, m: re.Match) -> str:
        text = self.role(m.group("role"), m.group("content"))
        # "the exercise {ref}`x`" must not read "the exercise Exercise 7.4" (as it does on the website)
        kind, _, number = text.partition(" ")
        before = m.string[:m.start()]
        if number and kind in ("Exercise", "Figure") and re.search(rf"\b{kind}\s+$", before, re.IGNORECASE):
            return number
        return text

    def _blocks(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if TARGET_RE.match(line):
                i += 1
                continue
            if m := MATH_LABEL_RE.match(line):  # closes a display math block: $$ (label)
                out.append(f"{m.group('indent')}\\tag{{{self.targets[m.group('label')].number}}}")
                out.append(f"{m.group('indent')}$$")
                i += 1
                continue
            m = FENCE_RE.match(line)
            if not m:
                out.append(line)
                i += 1
                continue
            end = closing(lines, i, m.group("fence"))
            if end is None:
                raise MystError(f"{self.name}: the directive {{{m.group('name')}}} is never closed "
                                f"(no line {m.group('fence')})")
            body = lines[i + 1:end]
            opts, n = options(body)
            body = body[n:]
            out += self.directive(m.group("name"), m.group("arg").strip(), opts, self._blocks(body),
                                  m.group("indent"))
            i = end + 1
        return out


# --- the roles: {role}`content` -> the text the website shows ---------------------------------------------
Role = Callable[[ChapterText, str, str], str]  # (the chapter's text, the role's name, its content) -> plain text


def _glue(text: ChapterText, role: str, content: str) -> str:
    return text.glue(content, role)


def _math(text: ChapterText, role: str, content: str) -> str:
    return f"${content}$"


def _reference(text: ChapterText, role: str, content: str) -> str:
    """{eq}, {numref} and {ref}: "(1.2)", "Figure 1.1" (or the explicit title, "%s" its number), a section's title."""
    title, label = _explicit_title(content)
    target = text.target(label, role, content)
    if role == "eq":
        return f"({target.number})"
    if title is not None:
        return title.replace("%s", target.number).replace("{number}", target.number)
    if target.kind == "section":
        return target.title
    return f"({target.number})" if target.kind == "equation" else f"{KIND_NAMES[target.kind]} {target.number}"


def _cite(text: ChapterText, role: str, content: str) -> str:
    return text.cite(role, content)


def _html_tag(text: ChapterText, role: str, content: str) -> str:
    return f"<{role}>{content}</{role}>"


def _abbr(text: ChapterText, role: str, content: str) -> str:
    short, _, long = content.partition(" (")
    return f'<abbr title="{long.rstrip(")")}">{short}</abbr>' if long else short


def _term(text: ChapterText, role: str, content: str) -> str:
    return _explicit_title(content)[0] or content


def _doc(text: ChapterText, role: str, content: str) -> str:
    return text.doc_title(content)


ROLES: dict[str, Role] = {
    "glue": _glue, "glue:text": _glue, "glue:md": _glue,
    "math": _math,
    "eq": _reference, "numref": _reference, "ref": _reference,
    "cite": _cite, "cite:p": _cite, "cite:ps": _cite, "cite:t": _cite, "cite:ts": _cite,
    "sub": _html_tag, "sup": _html_tag, "kbd": _html_tag,
    "abbr": _abbr, "term": _term, "doc": _doc,
}


# --- the directives: ```{name} arg, :options:, body``` -> plain-Markdown lines ------------------------------
# (the chapter's text, the directive's name, its argument, options, body lines (resolved), indent) -> lines
Directive = Callable[[ChapterText, str, str, dict, list[str], str], list[str]]


def _exercise(text: ChapterText, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
    """The heading "### Exercise 1.2 (medium): Title"; the label stays visible: grading reports exercises by it."""
    number = text.exercise_number(opts.get("label"))
    return [indent + exercise_heading(number, arg), "", *body, "", indent + shown_label(opts["label"])]


def _quoted(title: str, body: list[str], indent: str) -> list[str]:
    heading = [f"{indent}> **{title}**", f"{indent}>"] if title else []
    return heading + [f"{indent}> {b[len(indent):]}".rstrip() for b in body]


def _admonition(text: ChapterText, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
    """A block quote headed by the admonition's kind, "**Note**", or its own title."""
    return _quoted(arg or name.capitalize().replace("Seealso", "See also"), body, indent)


def _titled(text: ChapterText, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
    """A block quote headed by the directive's argument, if any (an aside, a dropdown, a generic admonition)."""
    return _quoted(arg, body, indent)


def _math_block(text: ChapterText, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
    tag = [f"\\tag{{{text.targets[opts['label']].number}}}"] if opts.get("label") else []
    return [f"{indent}$$", *body, *(indent + t for t in tag), f"{indent}$$"]


def _code(text: ChapterText, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
    return [f"{indent}```{arg}", *body, f"{indent}```"]


def _left_out(text: ChapterText, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
    """An ungated ``{solution}``: students do not see it."""
    return []


ADMONITIONS = ("note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error", "seealso")
TITLED = ("admonition", "dropdown", "margin", "sidebar", "epigraph", "topic", "card")
DIRECTIVES: dict[str, Directive] = {
    "exercise": _exercise,
    **dict.fromkeys(ADMONITIONS, _admonition),
    **dict.fromkeys(TITLED, _titled),
    "math": _math_block,
    "code-block": _code, "code": _code, "code-cell": _code,
    "solution": _left_out,
}


def read_bib(path: Path) -> dict[str, tuple[str, str]]:
    """key -> (authors as the website cites them, year): 'Bloem', 'Pennington et al.', 'Rush and Lee'; in the
    order of the website's bibliography (pybtex's ``plain`` style sorts it by author, year and title)."""
    from pybtex.database import parse_file  # installed with jupyter-book (sphinxcontrib-bibtex)
    from pybtex.style.sorting.author_year_title import SortingStyle

    cited = {}
    for entry in SortingStyle().sort(parse_file(str(path)).entries.values()):
        key = entry.key
        last = [re.sub(r"[{}\\]|\\L", "", " ".join(p.last_names)) for p in entry.persons.get("author", [])]
        authors = last[0] if len(last) == 1 else " and ".join(last) if len(last) == 2 else f"{last[0]} et al."
        cited[key] = (authors, entry.fields.get("year", "n.d."))
    return cited


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _explicit_title(content: str) -> tuple[str | None, str]:
    m = re.fullmatch(r"(?s)(?P<title>.*?)\s*<(?P<label>[^<>]+)>", content.strip())
    return (m.group("title"), m.group("label")) if m else (None, content.strip())


__all__ = ["DIRECTIVES", "ROLES", "ChapterText", "MystError", "chapter_number", "exercise_heading", "myst_left",
           "read_bib"]
