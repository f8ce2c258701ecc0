"""Execute the chapters whose outputs are not yet in Jupyter Book's execution cache, several at a time.

    python scripts/execute_cache.py [--cache _build/.jupyter_cache] [--jobs N]

Jupyter Book (execute_notebooks: cache) runs the notebooks it has no cached outputs for one after
another while it builds. This fills the same cache first, with one kernel per core, so that
`make book` from clean takes about half as long on two cores, then the build finds every chapter
cached. It stores exactly what myst-nb would (the notebook executed in its own folder, with the
timeout of _config.yml); a chapter that is already cached, i.e. whose code is unchanged, is skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import yaml
from book_toc import toc_files
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution

ROOT = Path(__file__).resolve().parent.parent


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The .ipynb files listed in _toc.yml, in order."""
    return [root / f"{f}.ipynb" for f in toc_files(root) if (root / f"{f}.ipynb").is_file()]


def execute(path: Path, timeout: int) -> tuple[Path, nbformat.NotebookNode, float, str | None]:
    """Run one notebook in its own folder (as myst-nb does); return it executed, its time and any error."""
    nb = nbformat.read(path, as_version=4)
    result = single_nb_execution(nb, cwd=str(path.parent), timeout=timeout, allow_errors=False)
    return path, nb, result.time, result.exc_string


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=ROOT / "_build" / ".jupyter_cache")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    execute_config = config.get("execute", {})
    if execute_config.get("execute_notebooks") != "cache":
        print("execute_cache: _config.yml does not use the execution cache; nothing to do")
        return 0
    timeout = int(execute_config.get("timeout", 30))
    cache = get_cache(str(args.cache))
    todo = []
    for path in toc_notebooks():
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            todo.append(path)
    if not todo:
        print("execute_cache: every chapter is cached")
        return 0
    print(f"execute_cache: executing {len(todo)} chapter(s), {args.jobs} at a time", flush=True)
    failed = 0
    with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(todo)))) as pool:
        for path, nb, seconds, error in pool.map(execute, todo, [timeout] * len(todo)):
            name = path.relative_to(ROOT)
            if error:  # leave it to the build, which reports the error in context
                failed += 1
                print(f"execute_cache: {name} failed; the build will report it:\n{error}", file=sys.stderr)
                continue
            cache.cache_notebook_bundle(
                CacheBundleIn(nb, str(path), data={"execution_seconds": seconds}),
                check_validity=False, overwrite=True,
            )
            print(f"execute_cache: {name} executed in {seconds:.1f} s", flush=True)
    return 0  # a failed chapter is reported again, in context, by the build that follows


if __name__ == "__main__":
    sys.exit(main())
