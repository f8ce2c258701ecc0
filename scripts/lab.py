"""make lab: make the learners' editions into the learner's own folder, then open JupyterLab there.

    python scripts/lab.py [--folder my-notebooks] [chapters/NN_slug.ipynb ...] [-- extra jupyter lab options]

The folder (``my-notebooks/``, ignored by git) is the learner's: editions are made into it again on every
``make lab``, and a copy the learner has edited is kept, never overwritten (book_editions/learner_copies.py says
how; the script prints what it kept and where the fresh edition went). JupyterLab starts in that folder, so reading or
running a chapter there never changes a file git tracks (a kernel writes its Python version into the notebook
it runs, and autosave saves it).

The learners' JupyterLab is the book's environment with three things switched off, through the settings in
``scripts/learners_lab/`` (put first on ``JUPYTER_CONFIG_PATH``): nbgrader's lab and server extensions (its
Validate button and its menus belong to instructors, who keep them in their own ``jupyter lab``), and
jupyterlab-myst, which the editions do not need (they are plain Markdown; their display equations are
``equation*``, which it does not number a second time, see book_editions/plain_markdown.py). Its default
settings (``scripts/learners_lab/settings/overrides.json``) leave the arrow keys to a focused slider or menu of an
explorer, which JupyterLab would otherwise take for moving between cells. Its CSS
(``scripts/learners_lab/custom/custom.css``) puts an explorer's controls above its chart, as the website does
(``_static/site.css``), so that on a phone a control and what it moves are in view together: JupyterLab's own Vega
renderer puts them under the chart. It also lines up an explorer's sliders, and scales a chart down to its output's
width where that is narrower (JupyterLab on a phone leaves about 270 px). The CSS applies to Vega-Lite outputs
with controls only. JupyterLab loads custom CSS only from the Jupyter config directory (the learner's
``~/.jupyter``), so ``scripts/learners_lab/jupyter_server_config.py`` turns it on and points the server at the
book's file (it says how); a learner's own ``~/.jupyter/custom/custom.css`` is not loaded here. In a stock
JupyterLab the controls stay under the chart. As root (a Docker container), JupyterLab needs
``--allow-root``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from book_editions.learner_copies import place, report
from book_editions.learners import as_text, learner_edition
from book_toc import ROOT, chapters

LAB_CONFIG = ROOT / "scripts" / "learners_lab"
FOLDER = ROOT / "my-notebooks"


def lab_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the learners' JupyterLab settings first on JUPYTER_CONFIG_PATH."""
    env = dict(os.environ if env is None else env)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(LAB_CONFIG), *filter(None, [env.get("JUPYTER_CONFIG_PATH")])])
    return env


def lab_command(folder: Path, *options: str) -> list[str]:
    """The command that starts the learners' JupyterLab in ``folder`` (with ``--allow-root`` as root)."""
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={Path(folder).resolve()}", *root,
            f"--LabApp.app_settings_dir={LAB_CONFIG / 'settings'}", *options]


def make_folder(folder: Path, paths: list[Path]) -> str:
    """Make the editions of ``paths`` into ``folder``, keeping the learner's edited copies; say what was done.
    The copies leave out the Colab set-up cell: this is JupyterLab on the learner's machine."""
    return report(place({p.name: as_text(learner_edition(p, colab=False)) for p in paths}, folder), folder)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="chapter notebooks (default: every chapter)")
    parser.add_argument("--folder", type=Path, default=FOLDER, help="the learner's folder (default: my-notebooks)")
    parser.add_argument("--no-lab", action="store_true", help="make the editions only; do not start JupyterLab")
    args = parser.parse_args(argv)
    said = make_folder(args.folder, args.chapters or chapters())
    if said:
        print(said)
    if args.no_lab:
        return 0
    print(f"JupyterLab opens {args.folder}/: your copies of the chapters (solutions folded under each exercise).")
    command = lab_command(args.folder, *extra)
    os.execvpe(command[0], command, lab_env())
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
