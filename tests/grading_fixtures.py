"""A small synthetic chapter (three exercises on chapter 1's real checks) and submissions built from it."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import nbformat
from book_editions.exercise_cells import exercise_heading, shown_label
from book_editions.numbering import numbered

SETUP = ("import torch\nfrom attn_helpers.checks import ch01 as check\n\n"
         "q = torch.tensor([1.0, 1.0])\nk1, k2 = torch.tensor([2.0, 2.0]), torch.tensor([1.0, 1.0])")
RIGHT = {
    "ex-ch01-predict": "w_doubled = torch.softmax(torch.stack([2 * q @ k1, 2 * q @ k2]), dim=0)",
    "ex-ch01-function": "def self_attention(X):\n    W = torch.softmax(X @ X.T, dim=-1)\n    return W @ X, W",
    "ex-ch01-batch": ("Xs = check.sequence_first_batch()\nXb = Xs.transpose(0, 1)\n"
                      "Wb = torch.softmax(Xb @ Xb.transpose(1, 2), dim=-1)\nYs = (Wb @ Xb).transpose(0, 1)"),
}
# the same answers written differently: a helper function, torch.bmm
OTHER_RIGHT = {
    "ex-ch01-predict": "w_doubled = torch.softmax(torch.tensor([8.0, 4.0]), dim=-1)",
    "ex-ch01-function": ("def weights(X):\n    return torch.softmax(X @ X.T, dim=-1)\n\n"
                         "def self_attention(X):\n    W = weights(X)\n    return W @ X, W"),
    "ex-ch01-batch": ("Xs = check.sequence_first_batch()\nXb = Xs.permute(1, 0, 2)\n"
                      "Wb = torch.bmm(Xb, Xb.transpose(1, 2)).softmax(-1)\nYs = torch.bmm(Wb, Xb).permute(1, 0, 2)"),
}
WRONG = {
    "ex-ch01-predict": "w_doubled = torch.stack([2 * q @ k1, 2 * q @ k2])  # raw scores, no softmax",
    "ex-ch01-function": "def self_attention(X):\n    W = torch.softmax(X @ X.T, dim=0)\n    return W @ X, W",
    "ex-ch01-batch": ("Xs = check.sequence_first_batch()  # bmm batches over the tokens: attention across the batch\n"
                      "Wb = torch.softmax(Xs @ Xs.transpose(1, 2), dim=-1)\nYs = Wb @ Xs"),
}
CHECKS = {
    "ex-ch01-predict": "check.doubled_query_weights(w_doubled)",
    "ex-ch01-function": "check.self_attention_function(self_attention)",
    "ex-ch01-batch": "check.sequence_first_attention(Wb, Ys)",
}
LEVELS = {"ex-ch01-predict": "easy", "ex-ch01-function": "medium", "ex-ch01-batch": "hard"}
LABELS = list(CHECKS)


def md(source: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source)


def code(source: str, tags: list[str] | None = None) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {})


def exercise(label: str, answer: str, check: str | None = None) -> list[nbformat.NotebookNode]:
    """An exercise by the book's convention: directive, gate, solution, gate, check."""
    return [md(f"```{{exercise}} {label} ({LEVELS.get(label, 'easy')})\n:label: {label}\n\nDo it.\n```"),
            md(f"```{{solution-start}} {label}\n:class: dropdown\n```"),
            code(answer, ["solution"]),
            md("```{solution-end}\n```"),
            code(check if check is not None else CHECKS[label])]


def chapter(answers: dict[str, str] = RIGHT, checks: dict[str, str] = CHECKS,
            labels: list[str] = LABELS) -> nbformat.NotebookNode:
    cells = [md("# A synthetic chapter"), code(SETUP)]
    for label in labels:  # another chapter's labels (ex-ch02-…) get chapter 1's answers and checks
        same = "ex-ch01-" + label.split("-", 2)[2]
        cells += exercise(label, answers[same], checks.get(label, checks[same]))
    return nbformat.v4.new_notebook(cells=cells)


def student_edition(answers: dict[str, str] = RIGHT, labels: list[str] = LABELS) -> nbformat.NotebookNode:
    """``chapter(answers, labels=labels)`` in the form `make student` gives it: each directive a numbered
    heading that shows its label, also kept in its cell metadata; no gates; the answers tagged `solution`
    and the check cells `exercise-check`."""
    nb = chapter(answers, labels=labels)
    cells, number = [], 0
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "{solution-" in cell.source:
            continue
        if cell.cell_type == "markdown" and "{exercise}" in cell.source:
            number += 1
            label, level = labels[number - 1], LEVELS[LABELS[number - 1]]
            title, k = f"Do it — {level}", numbered(int(label[5:7]), number)
            cell = md(f"{exercise_heading(k, title)}\n\nDo it.\n\n{shown_label(label)}")
            cell.metadata["exercise"] = {"label": label, "title": title, "level": level, "number": k}
        elif cell.cell_type == "code" and cell.source in CHECKS.values():  # the checks of chapter()
            cell.metadata["tags"] = ["exercise-check"]
        cells.append(cell)
    nb.cells = cells
    return nb


def without_metadata(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose cells lost their metadata (tags, exercise labels), as some editors lose it."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        cell.metadata = {}
    return nb


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    nbformat.write(nb, path)
    return path


def with_first_answer_prefix(nb: nbformat.NotebookNode, prefix: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose first solution cell starts with ``prefix``."""
    nb = copy.deepcopy(nb)
    first = next(c for c in nb.cells if "solution" in c.metadata.get("tags", []))
    first.source = prefix + "\n" + first.source
    return nb


def tree_digest(folder: Path) -> str:
    """A digest of every file under ``folder`` (names and contents)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()
