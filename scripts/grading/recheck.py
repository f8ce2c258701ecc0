"""Re-check saved answers outside the student's kernel, and the one line per exercise that says how it went.

:func:`recheck` runs in the grader's process for answers that are plain data. For answers with functions, the
grader runs this module, ``python -m grading.recheck spec.json``, in a fresh sandboxed process, from a copy of the
modules :data:`SANDBOXED` names (the ``grading`` package as far as this module needs it) beside a fresh, private
copy of attn_helpers.

``spec.json`` holds the statement that imports the chapter's checks (``from attn_helpers.checks import
ch01 as check``) and, per exercise, its label, the book's check cell and the saved answers' file. For
each exercise this loads the answers (see answers.py), runs the book's check cell on them and prints one line,
:func:`report_line` (``RECHECK {"label": ..., "result": ..., "detail": ...}``), as soon as the outcome is known;
the grader reads them back with :func:`read_reports`.

Answers that contain functions run last: a function's code runs during its check and could print forged
lines; the grader keeps the first line per label, so it can only forge the lines of function exercises
after it.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from .answers import Unsupported, has_function, load_answers
from .outcome import Outcome, Result

MARK = "RECHECK "
SANDBOXED = ("__init__.py", "answers.py", "outcome.py", "recheck.py")  # what `python -m grading.recheck` imports


def _why_not_loaded(path: Path, exc: Exception) -> str:
    import torch

    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:
        names = []
    if names:
        return (f"the answer contains {', '.join(names)}, which only the student's kernel can rebuild "
                f"(a class defined in the notebook, or not from torch.nn or attn_helpers)")
    return f"the saved answers do not load ({type(exc).__name__})"


def recheck(check_import: str, label: str, check_source: str, path: Path, sandboxed: bool = False) -> Outcome:
    """The outcome of the book's check cell run on the answers saved in ``path``.

    Outside the sandbox (``sandboxed=False``) only data and ``nn.Module``s of torch and attn_helpers load.
    """
    from attn_helpers.checks import CheckFailed  # the grader's private copy (notebook.prepare_checks)
    from attn_helpers.checks.protocol import PASS_MARK, shows_a_pass

    if not path.exists():
        return Outcome(Result.UNVERIFIED, "no answers were saved (the kernel stopped before the grader's save cell)")
    try:
        namespace = load_answers(path, modules_only=not sandboxed)
    except Unsupported as exc:
        return Outcome(Result.UNVERIFIED, f"cannot re-check outside the student's kernel: {exc}")
    except Exception as exc:  # a class not allowed, or a file the student's kernel wrote or altered
        return Outcome(Result.UNVERIFIED, f"cannot re-check outside the student's kernel: {_why_not_loaded(path, exc)}")
    exec(check_import, namespace)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(check_source, f"<check {label}>", "exec"), namespace)
    except CheckFailed as exc:
        return Outcome(Result.FAILED, str(exc))
    except Exception as exc:
        return Outcome(Result.ERROR, f"{type(exc).__name__}: {exc}".splitlines()[0])
    if not shows_a_pass(out.getvalue()):
        return Outcome(Result.ERROR, f"the check printed no '{PASS_MARK} … correct' line")
    return Outcome(Result.PASSED)


def report_line(label: str, outcome: Outcome) -> str:
    """The line the sandboxed re-check prints for one exercise."""
    return MARK + json.dumps({"label": label, **outcome.as_json()})


def read_reports(stdout: str, labels: list[str]) -> dict[str, Outcome]:
    """{label: outcome} of the first well-formed :func:`report_line` for each of ``labels`` in ``stdout``."""
    found: dict[str, Outcome] = {}
    for line in stdout.splitlines():
        if line.startswith(MARK):
            try:
                got = json.loads(line.removeprefix(MARK))
                if got["label"] in labels:
                    found.setdefault(got["label"], Outcome.from_json(got))
            except (ValueError, KeyError, TypeError):
                continue
    return found


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    exercises = sorted(spec["exercises"], key=lambda e: has_function(Path(e["file"])))
    for ex in exercises:
        outcome = recheck(spec["check_import"], ex["label"], ex["check_source"], Path(ex["file"]), sandboxed=True)
        sys.__stdout__.write(report_line(ex["label"], outcome) + "\n")
        sys.__stdout__.flush()


if __name__ == "__main__":
    main()
