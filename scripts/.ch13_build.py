"""Builds chapters/13_small_language_model.ipynb from the cells below (a working file of chapter 13's author)."""
import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
colab = json.loads((ROOT / "chapters/12_cost_of_the_cache.ipynb").read_text())["cells"][1]

cells = []


def md(source):
    cells.append({"cell_type": "markdown", "metadata": {}, "source": source.strip("\n")})


def code(source, tags=None, figure=None):
    meta = {}
    if figure:
        meta["mystnb"] = {"figure": {"caption": figure[1], "name": figure[0]}, "image": {"alt": figure[2]}}
    if tags:
        meta["tags"] = tags
    cells.append({"cell_type": "code", "metadata": meta, "source": source.strip("\n"), "outputs": [],
                  "execution_count": None})


exec((ROOT / "scripts/.ch13_cells.py").read_text())

old = {}
path = ROOT / "chapters/13_small_language_model.ipynb"
if path.exists():
    for c in json.loads(path.read_text())["cells"]:
        old[c["source"] if isinstance(c["source"], str) else "".join(c["source"])] = c
for i, c in enumerate(cells):
    c["id"] = hashlib.sha1(f"ch13-{i}-{c['source'][:60]}".encode()).hexdigest()[:8]
    c["source"] = c["source"].splitlines(keepends=True)
    if c["cell_type"] == "markdown":
        c.pop("outputs", None)
        c.pop("execution_count", None)
cells.insert(1, colab)
nb = {"cells": cells, "metadata": {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                      "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                      "pygments_lexer": "ipython3"}}, "nbformat": 4, "nbformat_minor": 5}
path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
print(len(cells), "cells")
