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
            assert name in pins and pins[name] in req.specifier, \
                f"requirements.in asks {line}, the lock has {pins.get(name)}"


def pinned_by(requires: list[str]) -> dict[str, Version]:
    """The exact pins (== a version, no wildcard) among a distribution's requirements that apply here.

    PyPI's torch wheel for Linux on x86-64 pins its CUDA libraries and triton this way; the CPU wheel the
    lock was resolved from has none, so they are not in the lock, but the lock's torch pin fixes them all.
    """
    pins = {}
    for line in requires:
        req = Requirement(line)
        specs = list(req.specifier)
        exact = len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version
        if exact and (req.marker is None or req.marker.evaluate({"extra": ""})):
            pins[canonicalize_name(req.name)] = Version(specs[0].version)
    return pins


def torch_requires() -> list[str]:
    try:
        return metadata.requires("torch") or []
    except metadata.PackageNotFoundError:  # reported as "pinned but not installed"
        return []


UNPINNED = ("installed but not in requirements.txt: {}. If the book needs them, add them to requirements.in and "
            "run make lock; if the lock has dropped them, pip uninstall them (or delete .venv and run make setup).")


def differences(have: dict[str, Version], pins: dict[str, Version], torch_requires: list[str]) -> list[str]:
    """What keeps the environment `have` from being exactly the lock `pins`, as messages; [] when it is."""
    by_torch = {name: version for name, version in pinned_by(torch_requires).items() if name not in pins}
    problems = []
    unpinned = sorted(set(have) - set(pins) - NOT_LOCKED - set(by_torch))
    if unpinned:
        problems.append(UNPINNED.format(unpinned))
    off_torch = {n: f"{have[n]} (torch pins {v})" for n, v in by_torch.items() if n in have and have[n] != v}
    if off_torch:
        problems.append(f"installed at another version than the locked torch pins: {off_torch}. Torch needs "
                        "them: install the versions it pins, or delete .venv and run make setup.")
    missing = sorted(set(pins) - set(have))
    if missing:
        problems.append(f"pinned but not installed: {missing}. Run make setup.")
    drift = {n: f"{have[n]} (lock: {pins[n]})" for n in pins if n in have and public(have[n]) != pins[n]}
    if drift:
        problems.append(f"installed at another version than the lock: {drift}")
    return problems


def test_the_environment_is_exactly_the_lock():
    problems = differences(installed(), pinned(), torch_requires())
    assert not problems, "\n".join(problems)


# Requirements in the form of PyPI's torch wheel (whose CUDA pins carry a Linux x86-64 marker; here they
# have none, so that the test means the same on any machine), with one pin for a platform that is no machine.
PYPI_TORCH = ["filelock", "jinja2", "networkx>=2.5.1", "setuptools; python_version >= '3.99'",
              "nvidia-cublas-cu12==12.8.4.1", "triton==3.5.1", "sympy==1.13.*",
              "nvidia-cufft-cu12==11.3.3.83; platform_system == 'NoSuchSystem'",
              "optree==0.13.0; extra == 'optree'"]


def test_the_exact_pins_of_torch_are_accepted_and_nothing_else():
    pins = {"torch": Version("2.13.0"), "filelock": Version("3.20.0"), "jinja2": Version("3.1.6")}
    have = {**pins, "torch": Version("2.13.0+cpu"), "pip": Version("25.0"), "attn-helpers": Version("0.1.0")}
    assert differences(have, pins, PYPI_TORCH) == []
    with_cuda = {**have, "nvidia-cublas-cu12": Version("12.8.4.1"), "triton": Version("3.5.1")}
    assert differences(with_cuda, pins, PYPI_TORCH) == []                      # what torch itself pins
    for extra in ({"nvidia-cufft-cu12": Version("11.3.3.83")},                 # pinned for another platform
                  {"optree": Version("0.13.0")},                               # pinned for an optional extra
                  {"networkx": Version("2.5.1")},                              # a lower bound, not a pin
                  {"sympy": Version("1.13.1")},                                # a wildcard, not one version
                  {"lark": Version("1.2.2")}):                                 # dropped from the lock
        assert differences({**have, **extra}, pins, PYPI_TORCH) == [UNPINNED.format(list(extra))]
    assert differences({**have, "nvidia-cublas-cu12": Version("12.9.0")}, pins, PYPI_TORCH) == [
        "installed at another version than the locked torch pins: {'nvidia-cublas-cu12': '12.9.0 (torch pins "
        "12.8.4.1)'}. Torch needs them: install the versions it pins, or delete .venv and run make setup."]
    assert differences({k: v for k, v in have.items() if k != "jinja2"}, pins, PYPI_TORCH) == [
        "pinned but not installed: ['jinja2']. Run make setup."]
    assert differences({**have, "jinja2": Version("3.1.5")}, pins, PYPI_TORCH) == [
        "installed at another version than the lock: {'jinja2': '3.1.5 (lock: 3.1.6)'}"]
