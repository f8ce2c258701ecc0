"""Shared test set-up: a non-interactive matplotlib backend and the repository root (scripts/ and _ext/ are importable
through pyproject.toml's pytest `pythonpath`)."""

from pathlib import Path

import matplotlib
import pytest

# The explorers' browser tests share the fixture site_tab (the built site in one Chromium tab).
pytest_plugins = ["explorer_browser"]

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def glove():
    """The shipped GloVe subset, loaded once for the whole test session."""
    from attn_helpers import GloVe

    return GloVe()


@pytest.fixture(scope="session")
def recall_head():
    """Chapter 4's recall head, trained once (200 steps) for the tests of its checks."""
    import torch

    import attn_helpers as ah
    from attn_helpers import tasks

    torch.manual_seed(0)
    head = ah.SelfAttentionHead(19, 16, d_v=10)
    tasks.train_recall(head, steps=200, lr=0.05, seed=0)
    return head


def pytest_collection_modifyitems(items):
    """Longest work first: heavy test modules, then the chapters under nbval, then the many quick unit tests.

    pytest-xdist (`--dist loadfile --no-loadscope-reorder`) hands out whole files in this order, so the two test
    processes end on small files and finish together, instead of one idling while the other runs a long file last.
    The sort is stable: the cells of a notebook keep their order.
    """
    def rank(item):
        if item.get_closest_marker("heavy"):
            return 0
        return 1 if item.path.suffix == ".ipynb" else 2

    items.sort(key=rank)
