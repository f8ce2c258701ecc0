"""requirements.txt is a complete lock: the book's environment holds exactly the pinned packages."""

from __future__ import annotations

import sysconfig
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
NOT_LOCKED = {"pip", "attn-helpers"}  # the installer itself, and the book's own package (pip install -e .)


def pinned() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        assert req.marker is None or req.marker.evaluate(), f"unexpected marker in the lock: {line}"
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"not an exact pin: {line!r}"
        pins[canonicalize_name(req.name)] = Version(specs[0].version)
    return pins


def installed() -> dict[str, Version]:
    """What the environment's site-packages holds. Not all of sys.path: importing setuptools appends its own
    _vendor folder (jaraco.text, more-itertools…) to it, so the answer would depend on what ran before."""
    site = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    return {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions(path=site)}


def public(v: Version) -> Version:
    return Version(v.public)  # a local build label such as 2.13.0+cpu still satisfies ==2.13.0


def test_every_line_of_the_lock_is_an_exact_pin():
    pins = pinned()
    assert len(pins) > 100  # the whole tree, not just the direct requirements
    for direct in ("torch", "nbval", "jupyter-book", "pydata-sphinx-theme", "ipython", "docutils"):
        assert direct in pins, f"{direct} is not pinned in requirements.txt"
    assert pins["torch"] == Version("2.13.0")


def test_the_lock_pins_every_direct_requirement():
    pins = pinned()
    for line in (ROOT / "requirements.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            name = canonicalize_name(req.name)
            assert name in pins and pins[name] in req.specifier, f"requirements.in asks {line}, the lock has {pins.get(name)}"


def test_the_environment_is_exactly_the_lock():
    pins, have = pinned(), installed()
    unpinned = sorted(set(have) - set(pins) - NOT_LOCKED)
    assert not unpinned, (f"installed but not in requirements.txt: {unpinned}. If the book needs them, add them to "
                          "requirements.in and run make lock; if the lock has dropped them, pip uninstall them "
                          "(or delete .venv and run make setup).")
    missing = sorted(set(pins) - set(have))
    assert not missing, f"pinned but not installed: {missing}. Run make setup."
    drift = {n: f"{have[n]} (lock: {pins[n]})" for n in pins if public(have[n]) != pins[n]}
    assert not drift, f"installed at another version than the lock: {drift}"


