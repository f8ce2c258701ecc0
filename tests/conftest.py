"""Shared test set-up: a non-interactive matplotlib backend, the repository root, scripts/ importable."""

import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


@pytest.fixture(scope="session")
def glove():
    """The shipped GloVe subset, loaded once for the whole test session."""
    from attn_helpers import GloVe

    return GloVe()
