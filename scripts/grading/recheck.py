"""Re-check saved answers outside the student's kernel.

:func:`recheck` runs in the grader's process for answers that are plain data. For answers with functions,
grade.py runs ``python recheck.py spec.json`` in a fresh sandboxed process.

``spec.json`` holds the statement that imports the chapter's checks (``from attn_helpers.checks import
ch01 as check``) and, per exercise, its label, the book's check cell and the saved answers' file. For
each exercise this loads the answers (see answers.py), runs the book's check cell on them with a fresh,
private copy of attn_helpers, and prints one line ``RECHECK {"label": ..., "result": ..., "detail": ...}``
with result passed, failed, error or unverified, as soon as it is known.

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

if __package__:  # imported by grade.py for MARK
    from .answers import Unsupported, has_function, load_answers
else:  # run as a script in the sandbox
    from answers import Unsupported, has_function, load_answers

MARK = "RECHECK "


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


def recheck(check_import: str, label: str, check_source: str, path: Path, sandboxed: bool = False) -> tuple[str, str]:
    """(result, detail) of the book's check cell run on the answers saved in ``path``.

    Outside the sandbox (``sandboxed=False``) only data and ``nn.Module``s of torch and attn_helpers load.
    """
    from attn_helpers.checks import CheckFailed

    if not path.exists():
        return "unverified", "no answers were saved (the kernel stopped before the grader's save cell)"
    try:
        namespace = load_answers(path, modules_only=not sandboxed)
    except Unsupported as exc:
        return "unverified", f"cannot re-check outside the student's kernel: {exc}"
    except Exception as exc:  # a class not allowed, or a file the student's kernel wrote or altered
        return "unverified", f"cannot re-check outside the student's kernel: {_why_not_loaded(path, exc)}"
    exec(check_import, namespace)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(check_source, f"<check {label}>", "exec"), namespace)
    except CheckFailed as exc:
        return "failed", str(exc)
    except Exception as exc:
        return "error", f"{type(exc).__name__}: {exc}".splitlines()[0]
    if "✓" not in out.getvalue():
        return "error", "the check printed no '✓ … correct' line"
    return "passed", ""


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    exercises = sorted(spec["exercises"], key=lambda e: has_function(Path(e["file"])))
    for ex in exercises:
        result, detail = recheck(spec["check_import"], ex["label"], ex["check_source"], Path(ex["file"]),
                                 sandboxed=True)
        sys.__stdout__.write(MARK + json.dumps({"label": ex["label"], "result": result, "detail": detail}) + "\n")
        sys.__stdout__.flush()


if __name__ == "__main__":
    main()
