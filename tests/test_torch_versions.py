"""make torch-versions (scripts/torch_versions.py): the PyTorch range pyproject.toml declares is the range it runs.

The matrix itself (a venv per version, every chapter) is its own target, never part of make test; these tests
check that it tests the declared floor, pins what it says, and tells an error from a differing output.
"""

from __future__ import annotations

from pathlib import Path

import tomllib
import torch
import torch_versions
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def declared_torch() -> Requirement:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_requirement,) = [r for r in map(Requirement, dependencies) if r.name == "torch"]
    return torch_requirement


def test_the_tested_floor_is_the_floor_pyproject_declares():
    (lowest,) = declared_torch().specifier  # one bound, a floor: no cap that the newest release would break
    assert lowest.operator == ">=" and torch_versions.floor() == lowest.version


def test_the_floor_is_no_newer_than_2_9_and_the_lock_is_in_the_range():
    """Issue 46: Colab and a course's frozen environment lag the newest release, so the floor is 2.9 or older."""
    floor = tuple(int(part) for part in torch_versions.floor().split("."))
    assert floor[:2] <= (2, 9)
    assert declared_torch().specifier.contains(torch.__version__.split("+")[0])


def test_a_version_venv_installs_the_lock_with_only_torch_changed():
    lock = (ROOT / "requirements.txt").read_text().splitlines()
    pinned = torch_versions.requirements("2.9.1").splitlines()
    changed = [(old, new) for old, new in zip(lock, pinned, strict=True) if old != new]
    assert len(changed) == 1 and changed[0][0].startswith("torch==") and changed[0][1] == "torch==2.9.1"


# What nbval writes into its junit report for a failing cell (nbval/plugin.py: NbCellError, repr_failure).
EXCEPTION = ("Notebook cell execution failed\nCell 23: Cell execution caused an exception\n\nInput:\nsaved = f().x\n\n"
             "Traceback:\n\n#x1B[31mAttributeError#x1B[39m: 'FooBackward' object has no attribute 'x'\n")  # junit's ESC
TIMEOUT = "Notebook cell execution failed\nCell 4: Timeout of 2000 seconds exceeded executing cell\n\nInput:\nf()\n"
DIFFERS = ("Notebook cell execution failed\nCell 7: Cell outputs differ\n\nInput:\nprint(x)\n\nTraceback:\n"
           "mismatch 'stdout'\n\nassert reference_output == test_output failed:\n\n  '0.1235' == '0.1234'\n")


def test_an_error_is_told_apart_from_a_differing_output():
    assert torch_versions.raised(EXCEPTION) and torch_versions.raised(TIMEOUT)
    assert not torch_versions.raised(DIFFERS)  # even though its report says "Traceback" and "failed"
    assert torch_versions.what_raised(EXCEPTION) == "AttributeError: 'FooBackward' object has no attribute 'x'"
    assert torch_versions.what_raised(TIMEOUT) == "Cell 4: Timeout of 2000 seconds exceeded executing cell"
