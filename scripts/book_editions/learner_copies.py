"""A learner's folder of editions (make lab): fresh editions go in, and a copy the learner edited is never lost.

``place(editions, folder)`` writes each edition (file name -> notebook text) into ``folder``, which git ignores
and the learner owns. It remembers what it wrote, as a fingerprint of each notebook's cells (their types and
sources), in ``folder/.editions.json``. For each edition:

- no copy yet: the edition is written (``new``);
- the copy's cells are the fresh edition's: it is left alone, outputs and all (``same``);
- the copy's cells are what was written last time (the learner ran it, perhaps, but typed nothing) and the book
  has changed since: the fresh edition replaces it (``updated``);
- otherwise the learner edited it (or it was never written here): it is kept as it is. When the book has changed
  since the copy was written, the fresh edition goes beside it, to ``folder/new-editions/`` (``kept``), and the
  learner is told once; a later ``make lab`` with the book unchanged says nothing of it again (``edited``).
  There too, a file the learner edited is never overwritten: the fresh edition then takes the next free name,
  ``01_weighted_average-2.ipynb``.

Running cells changes outputs and metadata, not sources, so a copy that was only read and run is updated
when the book changes; one in which a single character was typed is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

MANIFEST = ".editions.json"
ASIDE = "new-editions"


@dataclass
class Placed:
    name: str     # the edition's file name, e.g. 01_weighted_average.ipynb
    status: str   # new | same | updated | kept | edited
    path: Path    # where the fresh edition is: the copy itself, or beside it when the learner's copy was kept


def fingerprint(text: str) -> str | None:
    """A hash of a notebook's cells (type and source), or None for a file that is not a notebook."""
    try:
        cells = json.loads(text)["cells"]
        content = [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
                   for c in cells]
    except (ValueError, KeyError, TypeError):
        return None
    return hashlib.sha256(json.dumps(content).encode()).hexdigest()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _write(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def place(editions: dict[str, str], folder: Path) -> list[Placed]:
    """Put ``editions`` (file name -> notebook text) into ``folder`` without losing a learner's edits."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record_file = folder / MANIFEST
    try:
        written: dict[str, str] = json.loads(record_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        written = {}

    def ours(rel: str, fresh: str) -> bool:
        """True when ``rel`` is absent, or holds what was written there last time or the fresh edition."""
        text = _read(folder / rel)
        if text is None:
            return not (folder / rel).exists()
        now = fingerprint(text)
        return now is not None and now in (written.get(rel), fresh)

    placed = []
    for name, text in editions.items():
        fresh = fingerprint(text)
        current = _read(folder / name)
        if current is not None and fingerprint(current) == fresh:
            written[name] = fresh
            placed.append(Placed(name, "same", folder / name))
            continue
        if ours(name, fresh):
            _write(folder / name, text)
            written[name] = fresh
            placed.append(Placed(name, "new" if current is None else "updated", folder / name))
            continue
        if fresh == written.get(name):  # the learner's copy was made from this very edition: nothing new
            placed.append(Placed(name, "edited", folder / name))
            continue
        stem, n = Path(name).stem, 1
        rel = f"{ASIDE}/{name}"
        while not ours(rel, fresh):
            n += 1
            rel = f"{ASIDE}/{stem}-{n}.ipynb"
        if (aside := _read(folder / rel)) is not None and fingerprint(aside) == fresh:
            placed.append(Placed(name, "edited", folder / rel))  # this edition was put beside it before, and said so
            continue
        _write(folder / rel, text)
        written[rel] = fresh
        placed.append(Placed(name, "kept", folder / rel))
    _write(record_file, json.dumps(written, indent=1, sort_keys=True) + "\n")
    return placed


def report(placed: list[Placed], folder: Path) -> str:
    """What ``place`` did, in a few lines for the learner."""
    lines = []
    for p in placed:
        if p.status == "new":
            lines.append(f"wrote {p.path}")
        elif p.status == "updated":
            lines.append(f"updated {p.path} (the book changed; you had not edited your copy)")
        elif p.status == "kept":
            lines.append(f"kept your {Path(folder) / p.name} (you edited it); the new edition is {p.path}")
    edited = [p.name for p in placed if p.status == "edited"]
    if edited:
        names = ", ".join(edited[:-1]) + f" and {edited[-1]}" if len(edited) > 1 else edited[0]
        lines.append(f"kept {len(edited)} notebook{'s' if len(edited) > 1 else ''} you edited as you left "
                     f"{'them' if len(edited) > 1 else 'it'} ({names}): no new edition since the last make lab")
    same = sum(p.status == "same" for p in placed)
    if same:
        lines.append(f"{same} of your notebooks in {folder}/ are the current editions already")
    return "\n".join(lines)


__all__ = ["ASIDE", "MANIFEST", "Placed", "fingerprint", "place", "report"]
