"""The book's outputs mean the same on every machine (see scripts/portability.py and CONTRIBUTING.md).

Another CPU rounds the last bit of a float differently, so a glued number that carries 17 digits compares bits
that mean nothing to a reader. Each glued float carries the precision its prose prints, and no more; what a
machine changes beyond that is stated by an assert, not printed.
"""

import json
import re
import subprocess
import sys

import portability
import pytest
from book_chapters import CHAPTERS, by_name

GLUE_USE = re.compile(r"\{glue(?::text)?\}`([^`:]+)(?::([^`]*))?`")
RECORD = "application/papermill.record/text/plain"


def glued_floats(path):
    """{name: text of the glued value} for the floats a chapter glues, and {name: formats its prose uses}."""
    nb = json.loads(path.read_text())
    values, uses = {}, {}
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            for match in GLUE_USE.finditer(source):
                uses.setdefault(match.group(1), set()).add(match.group(2) or "")
        for output in cell.get("outputs", []):
            if RECORD in output.get("data", {}):
                text = output["data"][RECORD]
                if re.fullmatch(r"-?\d+\.\d+(e-?\d+)?|-?\d+e-?\d+", text):
                    values[output["metadata"]["scrapbook"]["name"]] = text
    return values, uses


def significant_digits(text: str) -> int:
    """The digits a float's text carries: 3 for "0.0413" and for "2.19e-10"."""
    return len(text.lstrip("-").split("e")[0].replace(".", "").lstrip("0"))


def allowed_digits(text: str, formats: set[str]) -> bool:
    """Does the glued `text` carry no more precision than the most precise of the prose's `formats`?

    Four significant digits are always allowed: kernels differ in the seventh (float32) or later.
    """
    value = float(text)
    for spec in formats:
        found = re.fullmatch(r"\.(\d+)([fe%])", spec)
        if found is None:
            continue
        n, kind = int(found.group(1)), found.group(2)
        if kind == "f" and value == round(value, n):
            return True
        if kind == "%" and value == round(value, n + 2):
            return True
        if kind == "e" and value != 0 and float(f"{value:.{n}e}") == value:
            return True
    return significant_digits(text) <= 4


@by_name
def test_glued_floats_carry_the_precision_the_prose_prints(chapter):
    values, uses = glued_floats(chapter)
    loud = {name: (text, sorted(uses.get(name, {"(unused)"})))
            for name, text in values.items() if not allowed_digits(text, uses.get(name, set()))}
    assert not loud, (f"{chapter.name}: glue these rounded to the precision the prose prints "
                      f"(glue(name, round(x, n)) for :.nf): {loud}")


def test_the_rule_rejects_a_full_precision_float():
    assert not allowed_digits("8.060798645019531", {".2f"})
    assert allowed_digits("8.06", {".2f"})
    assert allowed_digits("0.972", {".1%"}) and not allowed_digits("0.97213", {".1%"})
    assert allowed_digits("2.2e-10", {".1e"}) and not allowed_digits("2.1934e-10", {".0e"})
    assert allowed_digits("1e-05", {"g"}) and not allowed_digits("0.017714302986860275", set())


@pytest.mark.parametrize("config", portability.CONFIGS, ids=lambda c: c.name)
def test_each_kernel_set_is_what_it_claims(config):
    """The portability test's configurations really change torch's kernels, and start from no setting at all."""
    if not portability.runs_here(config):
        pytest.skip(f"this CPU cannot run torch's {config.variables['ATEN_CPU_CAPABILITY']} kernels")
    env = portability.environment(config)
    assert "PYTHONHASHSEED" not in env and "MKL_ENABLE_INSTRUCTIONS" not in env
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    capability, threads = out.split()
    wanted = config.variables.get("ATEN_CPU_CAPABILITY")
    if wanted:
        assert capability == wanted.upper()
    assert int(threads) == config.threads


def test_the_makefile_sets_no_numeric_variable():
    """The book's numbers hold without any setting: make exports none, so make test runs as a learner's Jupyter."""
    root = CHAPTERS[0].parent.parent
    for name in ("Makefile", ".binder/start"):
        text = (root / name).read_text()
        for variable in set(portability.NUMERIC_VARIABLES) - {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}:
            assert not re.search(rf"export\s+[^\n]*\b{variable}\b", text), f"{name} exports {variable}"


def shows_text(cell) -> bool:
    """Does a code cell print something (a number, a table), rather than only draw a figure?"""
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            return True
        data = output.get("data", {})
        if output["output_type"] in ("execute_result", "display_data") \
                and not any(k.startswith("image/") for k in data):
            if RECORD not in data:
                return True
    return False


@by_name
def test_every_output_nbval_ignores_says_why_and_asserts_what_it_claims(chapter):
    """A cell whose output varies between machines says so to the reader and asserts what holds everywhere."""
    for index, cell in enumerate(json.loads(chapter.read_text())["cells"]):
        if "nbval-ignore-output" not in cell.get("metadata", {}).get("tags", []):
            continue
        source = "".join(cell["source"])
        assert source.startswith("#"), f"{chapter.name} cell {index}: begin with a comment saying why its output varies"
        if shows_text(cell):
            assert re.search(r"^\s*assert\b", source, re.MULTILINE), (
                f"{chapter.name} cell {index}: its printed output varies, so assert what holds on every machine")
