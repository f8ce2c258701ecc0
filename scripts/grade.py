"""Grade a folder of submitted notebooks against the book's chapter, each in its own sandbox.

    python scripts/grade.py path/to/submissions [--chapter 01 (or 1, ch01) | --chapter-path chapters/01_….ipynb]
                            [--timeout 60] [--notebook-timeout 300] [--csv grades.csv] [--jobs 1]
    (what `make grade SUBMISSIONS=… [CHAPTER=01] [TIMEOUT=…] [NOTEBOOK_TIMEOUT=…] [GRADES=…]` runs)

Every file under the folder but grades.csv gets at least one row: each ``*.ipynb`` is one student's submission, named by
its path relative to the folder without ``.ipynb``; any other file is reported as not a notebook. The
chapter is ``--chapter`` or, without it, the one most submissions' exercise labels (``ex-chNN-…``) name.

Each submission is graded as nbgrader's autograde does, from the instructor's copy, and in isolation:

1. the exercises and their check cells come from the book's chapter: the submission's outputs are
   cleared, the book's check cells put back (by label), and a missing exercise is reported as missing;
2. the assembled copy runs in a fresh kernel in its own temporary folder, with its own copy of
   attn_helpers and the data, inside a bubblewrap sandbox (grading/sandbox.py), with a time limit per
   cell and per notebook after which the kernel is killed;
3. after each exercise a grader cell saves the answer variables the check reads; every exercise whose
   check passed in the student's kernel is checked again on those saved answers, outside that kernel
   (grading/recheck.py): plain data in the grader's own process, functions in a fresh sandboxed
   process. Only if both agree is it "passed".

Results: passed, failed (the detail is the check's hint), error (an exception, or the check did not
run), timeout, missing, unverified (the check passed in the kernel but its answers could not be
re-checked: look at it yourself). A kernel that never started is reported once, with its log's last lines.
instructors.md says which attacks each layer stops and which it cannot. The table goes to stdout and the
same rows to a CSV file (default: <folder>/grades.csv), whose last column holds the written prediction of
each "predict, then run" exercise, for a person to grade.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from grading.assemble import BookError, find_chapter, infer_chapter, read_book
from grading.notebook import grade_notebook, prepare_checks
from grading.report import WHOLE, Row, format_table, write_csv
from grading.sandbox import BWRAP, UNSANDBOXED


def _files(folder: Path, skip: set[Path]) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if (p.is_file() or p.is_symlink())
                  and ".ipynb_checkpoints" not in p.parts and p.resolve() not in skip)


def _student(folder: Path, path: Path) -> str:
    rel = path.relative_to(folder)
    return rel.with_suffix("").as_posix() if path.suffix == ".ipynb" else rel.as_posix()


def _grade_one(args: tuple) -> list[Row]:
    path, student, book, timeout, notebook_timeout, hide = args
    print(f"grading {student} ...", file=sys.stderr, flush=True)
    return grade_notebook(path, student, book, timeout, notebook_timeout, hide)


def grade_folder(folder: Path, chapter: str | None = None, chapter_path: Path | None = None, timeout: float = 60,
                 notebook_timeout: float = 300, jobs: int = 1, skip: set[Path] = frozenset()) -> list[Row]:
    """Grade every file under ``folder`` (sorted by path) against one chapter of the book."""
    files = _files(folder, {p.resolve() for p in skip})
    rows: dict[Path, list[Row]] = {}
    notebooks = []
    for path in files:
        if path.suffix != ".ipynb" or path.is_symlink():
            what = "a symbolic link" if path.is_symlink() else f"not a notebook ({path.suffix or 'no extension'})"
            rows[path] = [Row(_student(folder, path), WHOLE, "error",
                              f"{what}: not graded; hand in the chapter's .ipynb file")]
        else:
            notebooks.append(path)
    if chapter_path is None:
        if chapter is None:
            readable = []
            for path in notebooks:
                try:
                    readable.append(nbformat.read(path, as_version=4))
                except Exception:
                    pass
            chapter = infer_chapter(readable)
            if chapter is None:
                raise BookError(f"no exercise labels (ex-chNN-…) in the notebooks under {folder}; "
                                f"say which chapter was assigned with CHAPTER=NN (--chapter NN)")
            print(f"grading against chapter {chapter} (from the submissions' exercise labels; "
                  f"set CHAPTER=NN to choose)", file=sys.stderr)
        chapter_path = find_chapter(chapter)
    book = read_book(chapter_path)
    if not BWRAP:
        print(UNSANDBOXED, file=sys.stderr)
    # import the checks now if a kernel could write their copy, or to share one import among the workers
    prepare_checks(book.package_root, import_now=not BWRAP or (jobs > 1 and len(notebooks) > 1))
    tasks = [(p, _student(folder, p), book, timeout, notebook_timeout, [folder.resolve()]) for p in notebooks]
    if jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_grade_one, tasks))
    else:
        results = [_grade_one(t) for t in tasks]
    rows.update(zip(notebooks, results, strict=True))
    return [row for path in files for row in rows[path]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder with the submitted notebooks")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--chapter", help="the assigned chapter: 01, 1 or ch01 (default: from the labels)")
    which.add_argument("--chapter-path", type=Path, help="the instructor's notebook to grade against")
    parser.add_argument("--csv", type=Path, help="where to write the CSV (default: <submissions>/grades.csv)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds a single cell may run (default: 60)")
    parser.add_argument("--notebook-timeout", type=float, default=300,
                        help="seconds a whole notebook may run, wall clock (default: 300)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default: 1)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"error: {args.submissions} is not a folder; pass the folder that holds the submitted .ipynb files",
              file=sys.stderr)
        return 2
    csv_path = args.csv or args.submissions / "grades.csv"
    try:
        rows = grade_folder(args.submissions, args.chapter, args.chapter_path, args.timeout, args.notebook_timeout,
                            args.jobs, skip={csv_path, args.submissions / "grades.csv"})
    except BookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"error: no files under {args.submissions}", file=sys.stderr)
        return 2
    print(format_table(rows))
    write_csv(rows, csv_path)
    print(f"\nwrote {csv_path}")
    if not BWRAP:
        print(f"\n{UNSANDBOXED}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
