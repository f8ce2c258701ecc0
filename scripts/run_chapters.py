"""Execute chapters in place and strip what changes from run to run, so a re-run leaves no diff.

    python scripts/run_chapters.py chapters/*.ipynb      (what `make refresh` runs)
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py", "mimetype": "text/x-python",
    "name": "python", "nbconvert_exporter": "python", "pygments_lexer": "ipython3",
}
VOLATILE_CELL_KEYS = ("execution", "ExecuteTime", "collapsed", "scrolled")


def normalise(nb: nbformat.NotebookNode) -> None:
    """Keep only stable notebook metadata: the kernel's name, not its version or timings."""
    nb.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO})
    for cell in nb.cells:
        for key in VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)


def run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    normalise(nb)
    nbformat.write(nb, path)
    print(f"executed {path}")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        run(Path(name))
