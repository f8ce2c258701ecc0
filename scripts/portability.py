"""Re-execute the chapters under other kernel sets and compare every output with the committed one (nbval).

    python scripts/portability.py                      # every configuration below, every chapter
    python scripts/portability.py --config default     # one configuration (make test runs this one)
    python scripts/portability.py chapters/08_beyond_attention.ipynb --config native-2-threads

Another CPU, another thread count or another branch of MKL changes the last bit of float arithmetic. Each
configuration below makes this machine round the way another machine would, without changing the book: torch's
own kernels at another instruction set (ATEN_CPU_CAPABILITY), MKL's matrix products on another code path
(MKL_CBWR), two threads instead of one. The chapters must print the same outputs under every one of them: the
book's numbers are the same on every reader's machine, and the committed outputs are not one machine's.

Prints a table (configuration, chapters, differing cells) and exits 1 when any cell differs.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import book_toc

ROOT = Path(__file__).resolve().parent.parent
# Every variable that picks a numeric kernel (or Python's hash seed): a configuration starts from none of them,
# whatever the caller set, as a learner's own Jupyter does.
NUMERIC_VARIABLES = ("PYTHONHASHSEED", "ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                     "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Config:
    name: str
    what: str               # the machine it stands for
    variables: dict         # set on top of a clean environment
    threads: int            # torch threads in each kernel
    processes: int          # pytest processes (threads x processes = the machine's 2 cores)


CONFIGS = [
    Config("native", "this CPU's best kernels (AVX-512 where it has them), as `make refresh` runs", {}, 1, 2),
    Config("native-2-threads", "a learner's Jupyter on a two-core laptop: no setting, two threads", {}, 2, 1),
    Config("avx2", "a CPU with AVX2 and no AVX-512: torch's kernels and MKL's at AVX2",
           {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}, 1, 2),
    Config("default", "a CPU without AVX: torch's scalar kernels, MKL's SSE4.2 path",
           {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "SSE4_2"}, 1, 2),
]
BY_NAME = {config.name: config for config in CONFIGS}


def runs_here(config: Config) -> bool:
    """torch takes ATEN_CPU_CAPABILITY on trust and crashes on a CPU without the instructions: skip such a set."""
    wanted = config.variables.get("ATEN_CPU_CAPABILITY", "default")
    if wanted == "default":
        return True
    cpuinfo = Path("/proc/cpuinfo")
    return platform.machine() == "x86_64" and cpuinfo.exists() and wanted in cpuinfo.read_text().split()


def environment(config: Config) -> dict:
    """A copy of this process's environment with the configuration's numeric settings and nothing else's."""
    env = {k: v for k, v in os.environ.items() if k not in NUMERIC_VARIABLES}
    env.update(config.variables)
    env["OMP_NUM_THREADS"] = str(config.threads)
    return env


def nbval(chapters: list[Path], env: dict, processes: int, python: str = sys.executable,
          show: bool = False) -> dict[str, list[tuple[str, str]]]:
    """nbval over `chapters` with `python` in `env`: each chapter's failing cells as (cell, nbval's report of it).

    The kernels run on `python` too (jupyter_client starts the python3 kernel with the interpreter that asks).
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        command = [python, "-m", "pytest", "--nbval", "-q", "-p", "no:cacheprovider",
                   "--nbval-sanitize-with", str(ROOT / "tests" / "sanitize.cfg"), f"--junitxml={report}",
                   *(["-n", str(processes), "--dist", "loadfile"] if processes > 1 else []),
                   *map(str, chapters)]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if show:
            print(done.stdout[-20000:], flush=True)
        if not report.exists():
            raise RuntimeError(f"pytest did not run with {python}:\n{done.stdout}\n{done.stderr}")
        failures: dict[str, list[tuple[str, str]]] = {Path(c).name: [] for c in chapters}
        for case in ElementTree.parse(report).iter("testcase"):
            failed = case.find("failure")
            failed = failed if failed is not None else case.find("error")
            if failed is not None:
                chapter = case.get("classname").split(".")[-2] + ".ipynb"  # "chapters.NN_slug.ipynb"
                text = "\n".join(filter(None, (failed.get("message"), failed.text)))
                failures.setdefault(chapter, []).append((case.get("name"), text))
        return failures


def run(config: Config, chapters: list[Path], show: bool = False) -> dict[str, list[str]]:
    """nbval over `chapters` under `config`: the failing cells of each chapter (empty lists when all match)."""
    failures = nbval(chapters, environment(config), config.processes, show=show)
    return {chapter: [name for name, _ in cells] for chapter, cells in failures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="notebooks (default: every chapter)")
    parser.add_argument("--config", action="append", choices=list(BY_NAME),
                        help="a configuration (repeatable; default: all)")
    parser.add_argument("--show", action="store_true", help="print pytest's report (the differing outputs)")
    args = parser.parse_args(argv)
    chapters = args.chapters or book_toc.chapters()
    configs = [BY_NAME[name] for name in args.config] if args.config else CONFIGS
    differing = 0
    for config in configs:
        if not runs_here(config):
            print(f"{config.name:17} skipped: this CPU has no {config.variables['ATEN_CPU_CAPABILITY']}", flush=True)
            continue
        failures = run(config, chapters, args.show)
        cells = sum(map(len, failures.values()))
        differing += cells
        print(f"{config.name:17} {cells:3} differing cells  ({config.what})", flush=True)
        for chapter, names in sorted(failures.items()):
            if names:
                print(f"    {chapter}: {', '.join(names)}", flush=True)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
