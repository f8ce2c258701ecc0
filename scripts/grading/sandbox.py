"""A private folder and a bubblewrap sandbox for one submission's kernel (and for its re-check).

Each submission gets a fresh temporary folder ``work/`` holding

    book/attn_helpers/, book/data/   its own copies of the book's package and data (PYTHONPATH=book)
    book/chapters/                   the kernel's cwd, where a chapter's relative paths (../data) work
    home/                            HOME, IPYTHONDIR, MPLCONFIGDIR (the rest of the disk is read-only)
    answers/                         the answers the grader's save cells write (answers.py)
    kernel.json, ipc-*               the kernel's connection file and its ZMQ sockets (IPC transport)

and a sibling ``private/`` that the sandbox cannot see: bwrap's options, the kernelspec, the kernel's
log, and the answers copied out of ``work/answers`` as soon as each is saved.

With bubblewrap (``bwrap``) the kernel runs in its own pid, network, IPC and UTS namespaces with no
capabilities: it sees only its own processes in ``/proc``, has no network, and can write only to
``work/`` and to a private ``/tmp``. The submissions folder and the checkout's package, data and
chapters are hidden under empty tmpfs mounts. Its environment is emptied (``--clearenv``), so no
variable names the real folders either. Without bwrap the kernel runs unsandboxed, with the same
private copies and emptied environment; the caller warns loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BWRAP = shutil.which("bwrap")
KERNEL_NAME = "grader-sandbox"

UNSANDBOXED = (
    "WARNING: bubblewrap (bwrap) is not installed, so submissions run WITHOUT a sandbox: each kernel "
    "still works on private copies of attn_helpers and the data, but it can read and write every file "
    "you can (including the submissions folder and this checkout), see your processes in /proc and use "
    "the network. Install it (Debian/Ubuntu: apt-get install bubblewrap) before grading work you do not trust."
)


def make_workdir(work: Path, package_root: Path = ROOT) -> Path:
    """Fill ``work`` with private copies of ``attn_helpers`` and ``data``; return the kernel's cwd."""
    book = work / "book"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package_root / "attn_helpers", book / "attn_helpers", ignore=ignore)
    if (package_root / "data").is_dir():
        shutil.copytree(package_root / "data", book / "data", ignore=ignore)
    (book / "chapters").mkdir(parents=True)
    for sub in ("home", "home/.ipython", "home/.mpl"):
        (work / sub).mkdir()
    return book / "chapters"


def environment(work: Path) -> dict[str, str]:
    """The only variables the sandboxed process gets."""
    home = work / "home"
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "IPYTHONDIR": str(home / ".ipython"),
        "MPLCONFIGDIR": str(home / ".mpl"),
        "MPLBACKEND": "agg",
        "PYTHONPATH": str(work / "book"),
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
    }


def _hideable(path: Path, work: Path) -> bool:
    """True unless hiding ``path`` would hide the interpreter or the work folder."""
    keep = [Path(sys.prefix).resolve(), Path(sys.executable).resolve(), work.resolve()]
    return path.exists() and not any(k == path or path in k.parents for k in keep)


def wrap(argv: list[str], work: Path, cwd: Path, private: Path, hide: list[Path] = ()) -> list[str]:
    """``argv`` run in the sandbox (or, without bwrap, with an emptied environment).

    bwrap's own options name the hidden folders, and a sandboxed process can read bwrap's command line
    in ``/proc/1/cmdline``; so they go through a file in ``private`` (``bwrap --args 3``), which the
    sandbox cannot see, and its visible command line is only ``bwrap --args 3`` and ``argv``.
    """
    env = environment(work)
    if not BWRAP:
        return ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
    hidden = [ROOT / "attn_helpers", ROOT / "data", ROOT / "chapters", private, *hide]
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in dict.fromkeys([Path(sys.prefix), Path(sys.executable).parent, Path(sys.prefix).resolve(),
                               Path(sys.executable).resolve().parent]):
        path = Path(os.path.abspath(path))
        if Path("/tmp") in path.parents:  # a Python environment under /tmp: bring it back, read-only, at the
            args += ["--ro-bind", str(path.resolve()), str(path)]  # path the kernel is started by (a symlink too)
    for path in dict.fromkeys(p.resolve() for p in hidden):
        if _hideable(path, work):
            args += ["--tmpfs", str(path)]
    args += ["--bind", str(work), str(work),
             "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
             "--cap-drop", "ALL", "--die-with-parent", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", str(cwd)]
    args_file = private / f"bwrap-args-{len(list(private.glob('bwrap-args-*')))}"
    args_file.write_bytes(b"".join(a.encode() + b"\0" for a in args))
    # sh execs bwrap, so only bwrap (outside the sandbox's pid namespace) ever had the file's name
    return ["/bin/sh", "-c", f'exec "$0" --args 3 "$@" 3<"{args_file}"', BWRAP, *argv]


def write_kernelspec(work: Path, cwd: Path, private: Path, hide: list[Path] = ()) -> Path:
    """A kernelspec whose kernel is ipykernel inside the sandbox; returns the folder of kernelspecs.

    Interrupts are sent as messages: a SIGINT to the process group would stop bwrap itself.
    """
    argv = wrap([sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], work, cwd, private, hide)
    spec = private / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "grader sandbox", "language": "python", "interrupt_mode": "message"}))
    return spec.parent
