"""Execute one assembled notebook in a sandboxed kernel, with a per-cell and a per-notebook time limit.

A cell that runs longer than ``timeout`` seconds stops the notebook (nbclient's CellTimeoutError; an
interrupt is not enough, since a cell can ignore SIGINT). When the whole notebook has run for
``notebook_timeout`` seconds, a watchdog thread SIGKILLs the kernel's process group (with bwrap its whole
pid namespace dies with it). Either way the kernel is killed and the cells after it never run. A kernel that
dies before it answers its first request never started (the sandbox could not run Python, say): that is
reported apart, with the last lines of the kernel's log, since it is the grader's set-up that failed.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

from .sandbox import KERNEL_NAME, write_kernelspec


@dataclass
class Stopped:
    """Why execution stopped before the end: ``kind`` is 'timeout', 'died' or 'never started' (``log``: the
    last lines of the kernel's own output)."""

    kind: str
    cell: int | None
    detail: str
    log: list[str] = field(default_factory=list)


LOG_LINES = 5  # the lines of the kernel's log shown when it never started


def log_tail(path: Path, lines: int = LOG_LINES) -> list[str]:
    """The last ``lines`` non-empty lines of the kernel's log at ``path`` (none if it is missing)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


class _Watchdog(threading.Thread):
    """Kills the kernel's process group when the notebook overruns its time."""

    def __init__(self, notebook_timeout: float):
        super().__init__(daemon=True)
        self.deadline = time.monotonic() + notebook_timeout
        self.notebook_timeout = notebook_timeout
        self.pgid: int | None = None
        self.cell: int | None = None
        self.fired: Stopped | None = None
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            if time.monotonic() > self.deadline:
                self._kill(f"the notebook ran longer than {self.notebook_timeout:g} s")  # no cell: whole notebook

    def _kill(self, why: str) -> None:
        if self.pgid is None:  # the kernel is still starting: kill it as soon as it has a process group
            return
        self.fired = Stopped("timeout", self.cell, why)
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.done.set()


def execute(nb: nbformat.NotebookNode, work: Path, cwd: Path, private: Path, timeout: float,
            notebook_timeout: float, hide: list[Path] = (),
            after_cell: Callable[[int], None] | None = None) -> Stopped | None:
    """Run ``nb`` in place (outputs are written into it); return why it stopped early, or None."""
    spec_dirs = write_kernelspec(work, cwd, private, hide)
    km = AsyncKernelManager(kernel_name=KERNEL_NAME,
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec_dirs)]),
                            transport="ipc", ip=str(work / "ipc"), connection_file=str(work / "kernel.json"))
    dog = _Watchdog(notebook_timeout)
    ready = threading.Event()  # set when the kernel has answered: it started

    def notebook_started(**_):
        ready.set()
        kernel_started()

    def kernel_started(**_):
        if dog.pgid is None and km.provisioner is not None:
            dog.pgid = getattr(km.provisioner, "pgid", None) or km.provisioner.process.pid

    def started(cell, cell_index, **_):
        kernel_started()
        dog.cell = cell_index

    def executed(cell, cell_index, **_):
        dog.cell = None
        if after_cell:
            after_cell(cell_index)

    client = NotebookClient(nb, km=km, timeout=max(1, round(timeout)), allow_errors=True, record_timing=False,
                            on_notebook_start=notebook_started, on_cell_execute=started, on_cell_executed=executed,
                            shutdown_kernel="immediate", startup_timeout=60)
    dog.start()
    try:
        with open(private / "kernel.log", "wb") as log:  # the kernel's own stdout and stderr
            client.execute(cwd=str(cwd), stdout=log, stderr=log)
    except CellTimeoutError:
        return Stopped("timeout", dog.cell, f"ran longer than {timeout:g} s")
    except Exception as exc:  # the kernel died (os._exit, a crash, the watchdog) or could not start
        if dog.fired:
            return dog.fired
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if not ready.is_set():
            atexit.unregister(client._cleanup_kernel)  # nbclient cleaned up already; its exit hook would fail
            return Stopped("never started", None, why, log_tail(private / "kernel.log"))
        return Stopped("died", dog.cell, why)
    finally:
        dog.done.set()
        if dog.pgid is not None:  # leave nothing behind, even if the kernel forked
            try:
                os.killpg(dog.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return dog.fired
