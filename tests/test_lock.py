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


def pinned_by(requires: list[str]) -> dict[str, Version]:
    """The exact pins (==) among a distribution's requirements that apply here.

    PyPI's torch wheel for Linux on x86-64 pins its CUDA libraries and triton this way; the CPU wheel the
    lock was resolved from has none, so they are not in the lock, but the lock's torch pin fixes them all.
    """
    pins = {}
    for line in requires:
        req = Requirement(line)
        specs = list(req.specifier)
        if (req.marker is None or req.marker.evaluate({"extra": ""})) and len(specs) == 1 and specs[0].operator == "==":
            pins[canonicalize_name(req.name)] = Version(specs[0].version)
    return pins


def differences(have: dict[str, Version], pins: dict[str, Version], torch_requires: list[str]) -> list[str]:
    """What keeps the environment `have` from being exactly the lock `pins`, as messages; [] when it is."""
    from_torch = {name for name, version in pinned_by(torch_requires).items() if have.get(name) == version}
    problems = []
    unpinned = sorted(set(have) - set(pins) - NOT_LOCKED - from_torch)
    if unpinned:
        problems.append(f"installed but not in requirements.txt: {unpinned}. If the book needs them, add them to "
                        "requirements.in and run make lock; if the lock has dropped them, pip uninstall them "
                        "(or delete .venv and run make setup).")
    missing = sorted(set(pins) - set(have))
    if missing:
        problems.append(f"pinned but not installed: {missing}. Run make setup.")
    drift = {n: f"{have[n]} (lock: {pins[n]})" for n in pins if n in have and public(have[n]) != pins[n]}
    if drift:
        problems.append(f"installed at another version than the lock: {drift}")
    return problems


def test_the_environment_is_exactly_the_lock():
    problems = differences(installed(), pinned(), metadata.requires("torch") or [])
    assert not problems, "\n".join(problems)


# Requirements in the form of PyPI's torch wheel (whose CUDA pins carry a Linux x86-64 marker; here they
# have none, so that the test means the same on any machine), with one pin for a platform that is no machine.
PYPI_TORCH = ["filelock", "jinja2", "networkx>=2.5.1", "setuptools; python_version >= '3.99'",
              "nvidia-cublas-cu12==12.8.4.1", "triton==3.5.1",
              "nvidia-cufft-cu12==11.3.3.83; platform_system == 'NoSuchSystem'",
              "optree>=0.13.0; extra == 'optree'"]


def test_the_exact_pins_of_torch_are_accepted_and_nothing_else():
    pins = {"torch": Version("2.13.0"), "filelock": Version("3.20.0"), "jinja2": Version("3.1.6")}
    have = {**pins, "torch": Version("2.13.0+cpu"), "pip": Version("25.0"), "attn-helpers": Version("0.1.0")}
    assert differences(have, pins, PYPI_TORCH) == []
    with_cuda = {**have, "nvidia-cublas-cu12": Version("12.8.4.1"), "triton": Version("3.5.1")}
    assert differences(with_cuda, pins, PYPI_TORCH) == []                      # what torch itself pins
    for extra in ({"nvidia-cublas-cu12": Version("12.9.0")},                   # at another version
                  {"nvidia-cufft-cu12": Version("11.3.3.83")},                 # pinned for another platform
                  {"optree": Version("0.13.0")},                               # an optional extra, not a pin
                  {"networkx": Version("2.5.1")},                              # a lower bound, not a pin
                  {"lark": Version("1.2.2")}):                                 # dropped from the lock
        assert differences({**have, **extra}, pins, PYPI_TORCH) == [
            f"installed but not in requirements.txt: {list(extra)}. If the book needs them, add them to "
            "requirements.in and run make lock; if the lock has dropped them, pip uninstall them "
            "(or delete .venv and run make setup)."]
    assert "pinned but not installed: ['jinja2']" in differences({k: v for k, v in have.items() if k != "jinja2"},
                                                                 pins, PYPI_TORCH)[0]
    assert "jinja2" in differences({**have, "jinja2": Version("3.1.5")}, pins, PYPI_TORCH)[0]
