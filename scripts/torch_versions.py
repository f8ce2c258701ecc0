"""Run every chapter under each PyTorch version the book supports, and report what breaks and what differs.

    python scripts/torch_versions.py                                   # the floor and the newest, every chapter
    python scripts/torch_versions.py --version 2.9.1 chapters/10_flash_attention.ipynb --show

The versions are the floor that pyproject.toml declares (``torch>=X``, the one place it is written) and the
newest release pip installs here. Each gets its own venv, .venv-torch/VERSION (git ignores it; reused while its
requirements are unchanged): the lock, requirements.txt, with torch at that version, and attn_helpers from this
checkout (``pip install --no-deps -e .``). nbval runs the chapters there under this CPU's own kernels (the
``native`` set of scripts/portability.py), and the report separates, per version and chapter, the cells that
raised an error (the chapter does not run on that version) from the cells whose output differs (another
PyTorch may round a last digit otherwise: reported, expected). Exits 1 when any cell raised an error.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import book_toc
import portability

ROOT = portability.ROOT
VENVS = ROOT / ".venv-torch"
ANSI = re.compile(r"(\x1b|#x1B)\[[0-9;]*m")  # colours, as the terminal or a junit report (#x1B) has them


def floor() -> str:
    """The oldest torch pyproject.toml accepts: X of its ``"torch>=X"``."""
    found = re.findall(r'^\s*"torch\s*>=\s*([0-9][0-9.]*)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    if len(found) != 1:
        raise SystemExit("pyproject.toml should require torch once, as \"torch>=X\" (X the tested floor)")
    return found[0]


def newest() -> str:
    """The newest torch release pip would install here (its indexes and constraints, whatever is installed)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                           "--quiet", "--report", "-", "torch"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"pip found no torch to install ({done.stderr.strip()}): name the versions with --version")
    version = json.loads(done.stdout)["install"][0]["metadata"]["version"]
    return version.split("+")[0]  # 2.13.0+cpu is 2.13.0


def requirements(version: str) -> str:
    """The lock, requirements.txt, with its torch pinned to `version`."""
    lock = (ROOT / "requirements.txt").read_text()
    pinned, count = re.subn(r"^torch==\S+$", f"torch=={version}", lock, flags=re.MULTILINE)
    if count != 1:
        raise SystemExit(f"requirements.txt pins torch {count} times, not once")
    return pinned


def venv(version: str) -> Path:
    """The Python of .venv-torch/VERSION, built (once) with the lock at that torch and this checkout's package."""
    where = VENVS / version
    python = where / "bin" / "python"
    wanted = requirements(version)
    stamp = where / ".installed"  # the requirements it was built from, written once pip has installed them
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"building {where.relative_to(ROOT)} (torch {version}; a CUDA build downloads several GB)", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    (where / "requirements.txt").write_text(wanted)
    pip = [str(python), "-m", "pip", "install", "-qq"]  # errors only
    subprocess.run([*pip, "-r", str(where / "requirements.txt")], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    stamp.write_text(wanted)
    return python


def raised(report: str) -> bool:
    """Whether nbval's report of a failing cell is an error (an exception, a timeout), not a differing output."""
    return "Cell outputs differ" not in report


def what_raised(report: str) -> str:
    """The exception a failing cell raised (its traceback's last ``Name: message`` line), or nbval's reason."""
    lines = [line.strip() for line in ANSI.sub("", report).splitlines() if line.strip()]
    exceptions = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b", line)]
    reasons = [line for line in lines if line.startswith(("Cell ", "Timeout"))]
    return (exceptions or reasons or ["(no report)"])[-1][:160]


def run(version: str, chapters: list[Path], show: bool = False) -> int:
    """nbval over `chapters` in the venv of `version`; prints its report and returns the number of error cells."""
    python = venv(version)
    config = portability.BY_NAME["native"]
    env = portability.environment(config)
    env.update(VIRTUAL_ENV=str(python.parent.parent), PATH=f"{python.parent}:{env.get('PATH', '')}")
    env.pop("PYTHONHOME", None)
    here = subprocess.run([str(python), "-c", "import torch, attn_helpers; print(torch.__version__); "
                           "print(attn_helpers.__file__)"], env=env, capture_output=True, text=True)
    if here.returncode != 0:
        print(f"torch {version:8} cannot import attn_helpers:\n{here.stderr.strip()}", flush=True)
        return 1
    installed, package = here.stdout.splitlines()[-2:]
    if not Path(package).resolve().is_relative_to(ROOT):
        raise SystemExit(f"{python} imports attn_helpers from {package}, not from this checkout")
    failures = portability.nbval(chapters, env, config.processes, python=str(python), show=show)
    errors = {chapter: [c for c in cells if raised(c[1])] for chapter, cells in failures.items()}
    differing = {chapter: [c for c in cells if not raised(c[1])] for chapter, cells in failures.items()}
    count = sum(map(len, errors.values()))
    print(f"torch {installed:16} {len(chapters)} chapters: {count} cells raised an error, "
          f"{sum(map(len, differing.values()))} cells' outputs differ", flush=True)
    for chapter in sorted(failures):
        for name, report in errors[chapter]:
            print(f"    {chapter}  {name}  error: {what_raised(report)}", flush=True)
        if differing[chapter]:
            print(f"    {chapter}  outputs differ: {', '.join(name for name, _ in differing[chapter])}", flush=True)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="notebooks (default: every chapter)")
    parser.add_argument("--version", action="append", help="a torch version (repeatable; default: floor, newest)")
    parser.add_argument("--show", action="store_true", help="print pytest's report (the differing outputs)")
    args = parser.parse_args(argv)
    chapters = args.chapters or book_toc.chapters()
    versions = args.version or list(dict.fromkeys([floor(), newest()]))
    errors = sum(run(version, chapters, args.show) for version in versions)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
