"""The MyST syntax the editions read: roles, directive fences and their options, labelled math, targets.

Shared by book_editions/numbering.py (which numbers what these lines label) and book_editions/plain_markdown.py
(which resolves them); ``MystError`` is what either raises for markdown it cannot resolve.
"""

from __future__ import annotations

import re

ROLE_RE = re.compile(r"\{(?P<role>[a-z][a-z0-9_:-]*)\}`(?P<content>[^`]*)`")
FENCE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z][a-z0-9_-]*)\}[ \t]*(?P<arg>.*)$")
OPTION_RE = re.compile(r"^:(?P<key>[a-z][a-z0-9_-]*):[ \t]*(?P<value>.*)$")
MATH_LABEL_RE = re.compile(r"^(?P<indent>[ \t]*)\$\$[ \t]*\((?P<label>[^)\s]+)\)[ \t]*$")
TARGET_RE = re.compile(r"^\((?P<label>[^)\s]+)\)=[ \t]*$")
HEADING_RE = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$")


class MystError(ValueError):
    """Markdown that the plain-Markdown conversion does not know how to resolve."""


def options(body: list[str]) -> tuple[dict[str, str], int]:
    """The ``:key: value`` lines at the top of a directive's body, and how many lines they take."""
    opts, n = {}, 0
    for line in body:
        if not (m := OPTION_RE.match(line)):
            break
        opts[m.group("key")] = m.group("value").strip()
        n += 1
    return opts, n


def closing(lines: list[str], start: int, fence: str) -> int | None:
    """Index of the line closing the fence opened at ``start``: as in CommonMark, the first line of the same
    fence character at least as long (a directive nested inside another uses a shorter fence)."""
    char = fence[0]
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped and set(stripped) == {char} and len(stripped) >= len(fence):
            return j
    return None


def myst_left(text: str) -> list[str]:
    """The MyST syntax left in ``text``: roles, directive fences, option lines such as ``:label:``, labelled
    math, targets."""
    found = [m.group(0) for m in ROLE_RE.finditer(text)]
    for line in text.splitlines():
        if FENCE_RE.match(line) or OPTION_RE.match(line) or MATH_LABEL_RE.match(line) or TARGET_RE.match(line):
            found.append(line)
    return found


__all__ = ["FENCE_RE", "HEADING_RE", "MATH_LABEL_RE", "OPTION_RE", "ROLE_RE", "TARGET_RE", "MystError", "closing",
           "myst_left", "options"]
