"""Turn a chapter's MyST markdown into plain Markdown that JupyterLab renders as the website does.

The website (Jupyter Book, myst-nb, sphinx-exercise) resolves glued values, cross-references, citations
and directives; plain Jupyter shows them raw. ``ChapterText.of(nb, path)`` collects what resolving needs
from one chapter, numbering everything as Jupyter Book does with ``numfig_secnum_depth: 1``:

- the chapter number: the file's place among the chapters of ``_toc.yml`` (scripts/book_toc.py);
- figures (code cells with ``mystnb.figure.name``), labelled equations (``$$ ... $$ (label)``) and
  exercises, each numbered N.k in order of appearance;
- glued values: the ``display_data`` outputs that ``myst_nb.glue`` recorded (metadata ``scrapbook``);
- citations: author and year from references.bib.

``ChapterText.plain(source)`` then rewrites one markdown cell:

    {glue:text}`name:.4f`, {glue}`name`    the glued value, formatted as myst-nb formats it
    {eq}`label`                             (1.3)   (the text around it says "equation")
    {numref}`label`                         Figure 1.1, Exercise 6.3 (also in another chapter)
    {ref}`label`                            the same number, or a section's title
    {doc}`path`                             the page's title
    {cite:p}`key` / {cite:t}`key`           (Vaswani et al., 2017) / Vaswani et al. (2017)
    {sub}, {sup}, {kbd}, {abbr}, {term}     HTML tags or the plain word
    ```{exercise} Title (medium)            ### Exercise 1.2 (medium): Title
    ```{note}, {dropdown}, {margin}, ...     a block quote headed **Note** (or by its title)
    ```{math} with :label:                  $$\\begin{equation*} ... \\tag{1.2} \\end{equation*}$$
    $$ ... $$ (label)                       $$\\begin{equation*} ... \\tag{1.1} \\end{equation*}$$
    $$ ... $$                               $$\\begin{equation*} ... \\end{equation*}$$
    (label)=                                removed

Every display equation is an ``equation*``: its number is its ``\\tag``, as on the website, and an unnumbered
one stays unnumbered, in MathJax and KaTeX (JupyterLab, Notebook 7, Colab, VS Code) as in jupyterlab-myst,
which would otherwise number each ``$$`` block again, "(1.1) (1)" (it reads ``equation*`` as not numbered).

Anything else in MyST syntax raises ``MystError`` naming it, so a new role or directive in a chapter
fails loudly (tests/test_make_student.py runs this over every chapter) instead of reaching students raw.
Used by the editions (book_editions/steps.py, book_editions/nbgrader_course.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from book_toc import ROOT, toc_files

from .exercise_cells import LEVEL_RE, WORDS_MARKER_RE

ROLE_RE = re.compile(r"\{(?P<role>[a-z][a-z0-9_:-]*)\}`(?P<content>[^`]*)`")
FENCE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z][a-z0-9_-]*)\}[ \t]*(?P<arg>.*)$")
OPTION_RE = re.compile(r"^:(?P<key>[a-z][a-z0-9_-]*):[ \t]*(?P<value>.*)$")
MATH_LABEL_RE = re.compile(r"^(?P<indent>[ \t]*)\$\$[ \t]*\((?P<label>[^)\s]+)\)[ \t]*$")
TARGET_RE = re.compile(r"^\((?P<label>[^)\s]+)\)=[ \t]*$")
HEADING_RE = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$")
GLUE_MIME = "application/papermill.record/"
ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error",
               "seealso", "admonition", "dropdown"}
ASIDES = {"margin", "sidebar", "epigraph", "topic", "card"}  # shown as a quoted block, titled by the argument
# What the website calls each kind of numbered thing. The website writes "Fig. 1.1"; a sentence reads better
# with the whole word, and "Figure 1.1" is unambiguous on its own.
KIND_NAMES = {"figure": "Figure", "equation": "", "exercise": "Exercise"}


class MystError(ValueError):
    """Markdown that the plain-Markdown conversion does not know how to resolve."""



DISPLAY_MATH_RE = re.compile(r"\$\$(?P<body>.+?)\$\$", re.DOTALL)


def _unnumbered(m: re.Match) -> str:
    """A display equation as ``equation*`` (see the module's docstring), its lines and their quoting kept."""
    body = m.group("body")
    return m.group(0) if "\\begin{equation" in body else f"$$\\begin{{equation*}}{body}\\end{{equation*}}$$"

@dataclass
class Target:
    kind: str      # figure | equation | exercise | section
    number: str    # "1.2" ("" for a section)
    title: str = ""


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

    def target(self, label: str, role: str, content: str) -> Target:
        """The figure, equation, exercise or section ``label`` names, in this chapter or another."""
        found = self.targets.get(label) or book_targets(str(self.root)).get(label)
        if found is None:
            raise MystError(f"{self.name}: {{{role}}}`{content}` points to no figure, equation, exercise or "
                            f"labelled section of the book's chapters")
        return found

    # --- the roles -------------------------------------------------------------------------------
    def role(self, role: str, content: str) -> str:
        """The plain text that the website shows for ``{role}`content```."""
        if role in ("glue", "glue:text", "glue:md"):
            return self.glue(content, role)
        if role == "math":
            return f"${content}$"
        if role in ("eq", "numref", "ref"):
            title, label = _explicit_title(content)
            target = self.target(label, role, content)
            if role == "eq":
                return f"({target.number})"
            if title is not None:
                return title.replace("%s", target.number).replace("{number}", target.number)
            if target.kind == "section":
                return target.title
            return f"{KIND_NAMES[target.kind]} {target.number}".strip() if target.kind != "equation" \
                else f"({target.number})"
        if role.startswith("cite"):
            return self.cite(role, content)
        if role in ("sub", "sup", "kbd"):
            return f"<{role}>{content}</{role}>"
        if role == "abbr":
            short, _, long = content.partition(" (")
            return f'<abbr title="{long.rstrip(")")}">{short}</abbr>' if long else short
        if role == "term":
            return _explicit_title(content)[0] or content
        if role == "doc":
            return self.doc_title(content)
        raise MystError(f"{self.name}: the role {{{role}}} has no plain-Markdown form; "
                        f"add one to scripts/book_editions/plain_markdown.py (ChapterText.role)")

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
        if role in ("cite", "cite:p", "cite:ps"):
            return "(" + "; ".join(f"{self.citations[k][0]}, {self.citations[k][1]}" for k in keys) + ")"
        raise MystError(f"{self.name}: the citation role {{{role}}} has no plain-Markdown form")

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
            end = _closing(lines, i, m.group("fence"))
            if end is None:
                raise MystError(f"{self.name}: the directive {{{m.group('name')}}} is never closed "
                                f"(no line {m.group('fence')})")
            body = lines[i + 1:end]
            opts, n = _options(body)
            body = body[n:]
            out += self._directive(m.group("name"), m.group("arg").strip(), opts, self._blocks(body),
                                   m.group("indent"))
            i = end + 1
        return out

    def _directive(self, name: str, arg: str, opts: dict, body: list[str], indent: str) -> list[str]:
        while body and not body[0].strip():
            body = body[1:]
        while body and not body[-1].strip():
            body = body[:-1]
        if name == "exercise":  # the label stays visible: grading reports exercises by it
            target = self.targets.get(opts.get("label", ""), Target("exercise", "?"))
            label = [f"{indent}*Label: `{opts['label']}`*"] if opts.get("label") else []
            return [indent + exercise_heading(target.number, arg), "", *body, *([""] if label else []), *label]
        if name in ADMONITIONS or name in ASIDES:
            if name in ("admonition", "dropdown", *ASIDES):
                title = arg
            else:
                title = arg or name.capitalize().replace("Seealso", "See also")
            quoted = [f"{indent}> **{title}**", f"{indent}>"] if title else []
            return quoted + [f"{indent}> {b[len(indent):]}".rstrip() for b in body]
        if name == "math":
            tag = [f"\\tag{{{self.targets[opts['label']].number}}}"] if opts.get("label") else []
            return [f"{indent}$$", *body, *(indent + t for t in tag), f"{indent}$$"]
        if name in ("code-block", "code", "code-cell"):
            return [f"{indent}```{arg}", *body, f"{indent}```"]
        if name in ("solution",):  # an ungated solution: students do not see it
            return []
        raise MystError(f"{self.name}: the directive {{{name}}} has no plain-Markdown form; "
                        f"add one to scripts/book_editions/plain_markdown.py (ChapterText._directive)")


def number_targets(nb: nbformat.NotebookNode, chapter: int, name: str) -> dict[str, Target]:
    """The chapter's figures, labelled equations and exercises, each numbered N.k in order of appearance, and
    its labelled sections."""
    targets: dict[str, Target] = {}
    counts = {"figure": 0, "equation": 0, "exercise": 0}

    def number(kind: str, label: str, title: str = "") -> None:
        counts[kind] += 1
        if label in targets:
            raise MystError(f"{name}: the label {label!r} is defined twice")
        targets[label] = Target(kind, f"{chapter}.{counts[kind]}", title)

    for cell in nb.cells:
        if cell.cell_type == "code":
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if figure.get("name"):
                number("figure", figure["name"], figure.get("caption", ""))
            continue
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            if m := MATH_LABEL_RE.match(line):
                number("equation", m.group("label"))
            elif (m := FENCE_RE.match(line)) and m.group("name") in ("exercise", "math", "figure"):
                opts, _ = _options(lines[i + 1:])
                label = opts.get("label") or opts.get("name")
                if m.group("name") == "exercise":
                    number("exercise", label or f"(exercise {counts['exercise'] + 1})", m.group("arg").strip())
                elif label:
                    number("equation" if m.group("name") == "math" else "figure", label)
            elif (m := TARGET_RE.match(line)) and i + 1 < len(lines) and (h := HEADING_RE.match(lines[i + 1])):
                targets[m.group("label")] = Target("section", "", h.group("text"))
    return targets


@functools.cache
def book_targets(root: str) -> dict[str, Target]:
    """The targets of every chapter listed in ``root/_toc.yml`` (read once per run)."""
    targets: dict[str, Target] = {}
    for n, stem in enumerate((f for f in toc_files(Path(root)) if f.startswith("chapters/")), start=1):
        path = Path(root) / f"{stem}.ipynb"
        if path.is_file():
            targets.update(number_targets(nbformat.read(path, as_version=4), n, path.name))
    return targets


def exercise_heading(number: str, title: str) -> str:
    """'### Exercise 1.2 (medium): Self-attention as a function' from the directive's title."""
    levels = LEVEL_RE.findall(title)
    level_suffix = r"\s*(?:\((easy|medium|hard)\)|[—–-]\s*(easy|medium|hard))\s*$"
    bare = re.sub(level_suffix, "", title, flags=re.IGNORECASE).strip()
    level = f" ({levels[-1].lower()})" if levels else ""
    return f"### Exercise {number}{level}: {bare}" if bare else f"### Exercise {number}{level}"


def chapter_number(path: Path, root: Path = ROOT) -> int:
    """The chapter's number on the website: its place among the ``chapters/`` files of ``_toc.yml``."""
    chapters = [f for f in toc_files(root) if f.startswith("chapters/")]
    stem = f"chapters/{Path(path).stem}"
    if stem not in chapters:
        raise MystError(f"{Path(path).name} is not a chapter listed in {root / '_toc.yml'}, which gives each chapter "
                        "its number: add it there, or keep the file name of the chapter it varies (in a folder of "
                        "its own)")
    return chapters.index(stem) + 1


def read_bib(path: Path) -> dict[str, tuple[str, str]]:
    """key -> (authors as the website cites them, year): 'Bloem', 'Pennington et al.', 'Rush and Lee'."""
    from pybtex.database import parse_file  # installed with jupyter-book (sphinxcontrib-bibtex)

    cited = {}
    for key, entry in parse_file(str(path)).entries.items():
        last = [re.sub(r"[{}\\]|\\L", "", " ".join(p.last_names)) for p in entry.persons.get("author", [])]
        authors = last[0] if len(last) == 1 else " and ".join(last) if len(last) == 2 else f"{last[0]} et al."
        cited[key] = (authors, entry.fields.get("year", "n.d."))
    return cited


def myst_left(text: str) -> list[str]:
    """The MyST syntax left in ``text``: roles, directive fences, option lines such as ``:label:``, labelled
    math, targets."""
    found = [m.group(0) for m in ROLE_RE.finditer(text)]
    for line in text.splitlines():
        if FENCE_RE.match(line) or OPTION_RE.match(line) or MATH_LABEL_RE.match(line) or TARGET_RE.match(line):
            found.append(line)
    return found


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _explicit_title(content: str) -> tuple[str | None, str]:
    m = re.fullmatch(r"(?s)(?P<title>.*?)\s*<(?P<label>[^<>]+)>", content.strip())
    return (m.group("title"), m.group("label")) if m else (None, content.strip())


def _options(body: list[str]) -> tuple[dict[str, str], int]:
    """The ``:key: value`` lines at the top of a directive's body, and how many lines they take."""
    opts, n = {}, 0
    for line in body:
        if not (m := OPTION_RE.match(line)):
            break
        opts[m.group("key")] = m.group("value").strip()
        n += 1
    return opts, n


def _closing(lines: list[str], start: int, fence: str) -> int | None:
    """Index of the line closing the fence opened at ``start``: as in CommonMark, the first line of the same
    fence character at least as long (a directive nested inside another uses a shorter fence)."""
    char = fence[0]
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped and set(stripped) == {char} and len(stripped) >= len(fence):
            return j
    return None


__all__ = ["ChapterText", "MystError", "chapter_number", "exercise_heading", "myst_left", "read_bib"]
