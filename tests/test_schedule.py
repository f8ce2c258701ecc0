"""tests/conftest.py's order of the collected items: heavy modules, then notebook cells, then the rest."""

from pathlib import Path
from types import SimpleNamespace

from conftest import pytest_collection_modifyitems


def item(path: str, heavy: bool = False):
    return SimpleNamespace(path=Path(path), get_closest_marker=lambda name: name == "heavy" and heavy or None)


def test_heavy_modules_first_then_notebooks_in_cell_order():
    items = [item("tests/test_attention.py"), item("chapters/01.ipynb"), item("tests/test_wheel.py", heavy=True),
             item("chapters/01.ipynb"), item("tests/test_masks.py"), item("chapters/02.ipynb"),
             item("tests/test_grade_hostile.py", heavy=True)]
    cells = [items[1], items[3], items[5]]
    pytest_collection_modifyitems(items)
    assert [i.path.name for i in items] == ["test_wheel.py", "test_grade_hostile.py", "01.ipynb", "01.ipynb",
                                            "02.ipynb", "test_attention.py", "test_masks.py"]
    assert items[2:5] == cells  # a notebook's cells keep their order
