"""A plain `pip install .` (a wheel, not editable) carries the GloVe subset: GloVe() loads outside the repository."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.heavy  # builds the wheel and installs it: scheduled first (conftest.py)

LOAD = """
import attn_helpers, attn_helpers.glove as g
from attn_helpers import GloVe
glove = GloVe()
print(attn_helpers.__file__)
print(g.data_dir())
print(tuple(glove.vectors.shape), glove["ship"].shape[0])
"""


def run(*cmd: str | Path, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("ATTN_HELPERS_DATA", "PYTHONPATH")}
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, text=True, capture_output=True, timeout=300)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_installs_outside_the_repository_and_loads_glove(tmp_path):
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources, never in the checkout.
    source = tmp_path / "source"
    for name in ("attn_helpers", "data"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp_path, source,
        cwd=tmp_path)
    wheel = next(tmp_path.glob("attn_helpers-*.whl"))
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    # Reuse the book's installed dependencies (torch, numpy, pandas ...) without copying them: a .pth line
    # adds their folder to sys.path (without running the editable install's own .pth hook).
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    new_site = Path(run(python, "-c", purelib, cwd=tmp_path).strip())
    (new_site / "book_dependencies.pth").write_text(site.getsitepackages()[0] + "\n")
    run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", new_site, wheel, cwd=tmp_path)
    out = run(python, "-c", LOAD, cwd=tmp_path).splitlines()
    package_file, data, shape = out[0], out[1], out[2]
    assert package_file.startswith(str(new_site)), f"imported {package_file}, not the installed wheel"
    assert data.startswith(str(new_site)) and data.endswith("data"), data
    assert not data.startswith(str(ROOT))
    assert shape == "(50000, 50) 50"
