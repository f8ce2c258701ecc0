"""The room of every tolerance the book asserts, measured under every kernel set this machine can run.

    python scripts/tolerances.py                   # every chapter, every kernel set; writes tests/tolerance_room.json
    python scripts/tolerances.py chapters/11_longer_than_trained.ipynb --config default

A tolerance is a comparison whose result must not depend on the machine: `gap <= 1e-6`, `torch.allclose(a, b,
atol=1e-6)`, a self-check's comparison of an answer with what it expects. Each chapter is executed (nbclient, a real
kernel) with a recorder that sees every such comparison as it runs:

- in the chapter's code cells, a comparison with a small number (below 0.01) on one side, and every call of
  `allclose`, `isclose` or `assert_close` (an IPython AST transformer rewrites them to record, then compare);
- in `attn_helpers.checks`, every `torch.allclose` a check makes, filed under the exercise's check function.

Its room is how many times over the comparison would have to move to flip: for `gap <= tol`, tol / gap; for an
`allclose` that holds, the tolerance over the largest scaled difference; for one that must not hold (a wrong answer,
a different result), the reverse. `tests/test_tolerances.py` fails on a tolerance with less than 10x room on any
kernel set, and on one the record has not measured (a new or edited tolerance: run this script).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import operator
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import book_toc

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "tests" / "tolerance_room.json"
CHECKS = ROOT / "attn_helpers" / "checks"
SMALL = 0.01                                       # a compared number below this is a tolerance, not a claim
CLOSENESS = {"allclose", "isclose", "assert_close"}
REQUIRED_ROOM = 10.0
_OPS = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge}


# ------------------------------------------------------------------ which code is a tolerance (static, and shared)

def _small_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
            and 0 < abs(node.value) < SMALL)


def is_tolerance(node: ast.AST) -> bool:
    """A comparison with a small number on one side of an inequality, or a call of allclose, isclose or assert_close."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        return any(type(op).__name__ in _OPS and (_small_number(a) != _small_number(b))
                   for op, a, b in zip(node.ops, operands, operands[1:], strict=False))
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOSENESS


def cell_code(source: str) -> str:
    """A code cell's Python, its IPython magics (`%...`, `!...`) blanked so that the lines keep their numbers."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def chapter_sites(chapter: Path) -> Iterator[tuple[str, str]]:
    """(cell key, code) of every tolerance in a chapter's code cells; the key changes when the cell does."""
    for cell in json.loads(chapter.read_text())["cells"]:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            for node in ast.walk(ast.parse(cell_code(source))):
                if is_tolerance(node):
                    yield cell_key(cell["id"], source), ast.unparse(node)


def cell_key(cell_id: str, source: str) -> str:
    return f"{cell_id}:{hashlib.sha256(source.encode()).hexdigest()[:12]}"


def check_sites() -> Iterator[tuple[str, str]]:
    """(module, function) of every check in attn_helpers/checks/chNN.py that compares numbers with a tolerance."""
    comparing = {"check_tensor", "check_value", "allclose", "isclose", "tensors_close"}
    for module in sorted(CHECKS.glob("ch[0-9][0-9].py")):
        for function in ast.parse(module.read_text()).body:
            if isinstance(function, ast.FunctionDef):
                calls = {getattr(n.func, "attr", getattr(n.func, "id", None))
                         for n in ast.walk(function) if isinstance(n, ast.Call)}
                if calls & comparing:
                    yield module.name, check_key(function.name, ast.unparse(function))


def check_key(name: str, source: str) -> str:
    return f"{name}:{hashlib.sha256(source.encode()).hexdigest()[:12]}"


# ------------------------------------------------------------------ the room of one comparison

def closeness_room(holds: bool, scaled: float) -> float:
    """Room of a closeness test from its largest |a - b| / tolerance: 1/scaled when it holds, scaled when not."""
    if holds:
        return math.inf if scaled == 0 else 1 / scaled
    return scaled


def scaled_difference(name: str, a: object, b: object, kwargs: dict) -> float:
    """The largest |a - b| over the tolerance that `name` (torch's, NumPy's or math's) would allow there."""
    import numpy as np
    import torch

    if name == "isclose" and all(isinstance(x, (int, float)) for x in (a, b)):  # math.isclose
        allowed = max(kwargs.get("rel_tol", 1e-9) * max(abs(a), abs(b)), kwargs.get("abs_tol", 0.0))
        gap = abs(a - b)
        return 0.0 if gap == 0 else (math.inf if allowed == 0 else gap / allowed)
    a, b = (torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).detach().double() for x in (a, b))
    if name == "assert_close":
        rtol, atol = kwargs.get("rtol"), kwargs.get("atol")
        if rtol is None:
            rtol, atol = (1.3e-6, 1e-5) if a.dtype == torch.float32 else (1e-7, 1e-7)
    else:
        rtol, atol = kwargs.get("rtol", 1e-5), kwargs.get("atol", 1e-8)
    a, b = torch.broadcast_tensors(a, b)
    gap = (a - b).abs()
    both_nan = a.isnan() & b.isnan()
    allowed = atol + rtol * b.abs()
    scaled = torch.where(a == b, 0.0, gap / allowed)  # equal, infinities included, as allclose counts them
    scaled = torch.where(both_nan & kwargs.get("equal_nan", False), 0.0, scaled).nan_to_num(nan=math.inf)
    return float(scaled.max()) if scaled.numel() else 0.0


def bound_room(value: float, bound: float) -> float:
    """Room of a comparison of `value` with a small positive `bound`: how many times over it would have to move to
    reach the bound, whichever side it is on (a gap far below its tolerance, or a drift far above it)."""
    return math.inf if value <= 0 else max(bound / value, value / bound)


# ------------------------------------------------------------------ the recorder, installed in the chapter's kernel

class Recorder(ast.NodeTransformer):
    """Rewrites a cell's tolerances into calls of `__tolerance__` that record their room, then compute as before."""

    def __init__(self, cells: dict[str, str]) -> None:
        self.cells = cells                    # source -> cell key
        self.cell: str | None = None          # the key of the cell now running
        self.rooms: dict[str, dict] = {}      # "where|code" -> {"where", "code", "room"}

    # -- IPython hooks
    def pre_run_cell(self, info) -> None:  # noqa: ANN001
        self.cell = self.cells.get(info.raw_cell)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        def arguments() -> tuple[list[ast.expr], list[ast.keyword]]:
            operands = [node.left, *node.comparators]
            return [ast.List([ast.Constant(type(op).__name__) for op in node.ops], ast.Load()),
                    ast.List([ast.Constant(_small_number(o)) for o in operands], ast.Load()),
                    *[ast.Lambda(_no_args(), o) for o in operands]], []

        return self._recorded(node, "compare", arguments)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        return self._recorded(node, "close", lambda: ([node.func, *node.args], node.keywords))

    def _recorded(self, node: ast.expr, method: str, arguments: Callable) -> ast.AST:
        """`node` as a call of `__tolerance__.method(cell, code, *arguments)`, if it is a tolerance of a known cell."""
        code = ast.unparse(node)
        self.generic_visit(node)
        if self.cell is None or not is_tolerance(node):
            return node
        args, keywords = arguments()
        call = ast.Call(ast.Attribute(ast.Name("__tolerance__", ast.Load()), method, ast.Load()),
                        [ast.Constant(self.cell), ast.Constant(code), *args], keywords)
        return ast.copy_location(call, node)

    # -- what the rewritten code calls
    def record(self, where: str, code: str, room: float) -> None:
        entry = self.rooms.setdefault(f"{where}|{code}", {"where": where, "code": code, "room": math.inf})
        entry["room"] = min(entry["room"], room)

    def compare(self, where: str, code: str, ops: list[str], small: list[bool], *operands: Callable) -> object:
        values = [operands[0]()]
        result: object = True
        for i, op in enumerate(ops):
            values.append(operands[i + 1]())
            left, right = values[i], values[i + 1]
            result = _OPS[op](left, right) if op in _OPS else _eq_ops(op)(left, right)
            if op in _OPS and small[i] != small[i + 1]:
                flipped = {"Lt": "Gt", "LtE": "GtE", "Gt": "Lt", "GtE": "LtE"}
                value, bound, side = (left, right, op) if small[i + 1] else (right, left, flipped[op])
                worst = _as_float(value, max if side in ("Lt", "LtE") else min)
                if worst is not None:
                    self.record(f"cell {where}", code, bound_room(worst, abs(bound)))
            if not _truth(result):
                return result
        return result

    def close(self, where: str, code: str, function: Callable, *args: object, **kwargs: object) -> object:
        import torch

        name = function.__name__
        owner = getattr(function, "__self__", None)
        a, b, *rest = (owner, *args) if isinstance(owner, torch.Tensor) else args
        if name in ("allclose", "isclose") and not isinstance(a, float):  # rtol, atol, equal_nan by position
            kwargs = {**dict(zip(("rtol", "atol", "equal_nan"), rest, strict=False)), **kwargs}
        try:
            result = function(*args, **kwargs)
        except AssertionError:
            self.record(f"cell {where}", code, closeness_room(False, scaled_difference(name, a, b, kwargs)))
            raise
        holds = True if name == "assert_close" else bool(_truth(result) if _is_scalar(result) else result.all())
        self.record(f"cell {where}", code, closeness_room(holds, scaled_difference(name, a, b, kwargs)))
        return result

    def in_checks(self, original: Callable) -> Callable:
        """torch.allclose, recording the calls the self-checks make, filed under the exercise's check function."""

        def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):  # noqa: ANN001, ANN202
            result = original(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
            frame = sys._getframe(1)
            if Path(frame.f_code.co_filename).parent != CHECKS:
                return result  # not a check's comparison
            while frame is not None and not _in_check_function(frame):  # a generator's frame: its function's
                frame = frame.f_back
            if frame is not None:
                import inspect

                function = frame.f_globals.get(frame.f_code.co_name)
                source = ast.unparse(ast.parse(inspect.getsource(function))) if function else frame.f_code.co_name
                where = f"{Path(frame.f_code.co_filename).name}:{check_key(frame.f_code.co_name, source)}"
                scaled = scaled_difference("allclose", a, b, {"rtol": rtol, "atol": atol, "equal_nan": equal_nan})
                what = "the check's comparisons that hold" if result else "the check's comparisons that do not hold"
                self.record(where, what, closeness_room(bool(result), scaled))
            return result

        return allclose


def _in_check_function(frame) -> bool:  # noqa: ANN001
    """A frame of a module-level function of attn_helpers/checks/chNN.py (a check, or a helper it calls)."""
    path = Path(frame.f_code.co_filename)
    return path.parent == CHECKS and path.name.startswith("ch") and callable(frame.f_globals.get(frame.f_code.co_name))


def _no_args() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


def _eq_ops(op: str) -> Callable:
    return {"Eq": operator.eq, "NotEq": operator.ne, "Is": operator.is_, "IsNot": operator.is_not,
            "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b}[op]


def _is_scalar(x: object) -> bool:
    return not hasattr(x, "numel") or x.numel() == 1


def _truth(x: object) -> bool:
    return bool(x) if _is_scalar(x) else True  # an elementwise comparison's tensor: the cell decides what it means


def _as_float(x: object, worst: Callable) -> float | None:
    """A number, or the worst element of a tensor or array (the largest under an upper bound, else the smallest)."""
    try:
        if hasattr(x, "numel") or hasattr(x, "size") and not isinstance(x, (int, float)):
            import numpy as np
            import torch

            flat = torch.as_tensor(np.asarray(x) if not hasattr(x, "numel") else x).detach().double().flatten()
            return float(worst(flat)) if flat.numel() else None
        return float(x)
    except (TypeError, ValueError):
        return None


def install(shell, cells: dict[str, str]) -> Recorder:  # noqa: ANN001
    """Put a recorder in an IPython kernel: cells' tolerances rewritten, the checks' torch.allclose watched."""
    import torch

    recorder = Recorder(cells)
    shell.user_ns["__tolerance__"] = recorder
    shell.events.register("pre_run_cell", recorder.pre_run_cell)
    shell.ast_transformers.append(recorder)
    torch.allclose = recorder.in_checks(torch.allclose)
    return recorder


# ------------------------------------------------------------------ running the chapters under the kernel sets

def measure_chapter(chapter: Path, out: Path) -> None:
    """Execute one chapter with the recorder (in this process's environment) and write its rooms to `out`."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(chapter, as_version=4)
    cells = {"".join(c.source): cell_key(c.id, "".join(c.source)) for c in nb.cells if c.cell_type == "code"}
    setup = (f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import tolerances as _t; "
             f"_recorder = _t.install(get_ipython(), {cells!r})")
    dump = f"_t.write_rooms(_recorder, {str(out)!r})"
    nb.cells = [nbformat.v4.new_code_cell(setup), *nb.cells, nbformat.v4.new_code_cell(dump)]
    # A failing assert is a tolerance with less than 1x room: record it and go on (allow_errors), as the table says.
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(chapter.parent)}}).execute()
    raised = [i for i, c in enumerate(nb.cells[1:-1])
              if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    if raised:
        print(f"{chapter.name}: cells {raised} raised", file=sys.stderr)


def write_rooms(recorder: Recorder, out: str) -> None:
    Path(out).write_text(json.dumps(list(recorder.rooms.values()), default=str))


def measure(chapters: list[Path], configs: list) -> dict[str, dict]:
    """{"chapter|where|code": {"chapter", "where", "code", "room": {config: room}}} over the kernel sets given."""
    import portability

    jobs = [(config, chapter) for config in configs for chapter in chapters]

    def run(job: tuple) -> tuple:
        config, chapter = job
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rooms.json"
            done = subprocess.run([sys.executable, __file__, "--here", str(chapter), str(out)], cwd=ROOT,
                                  env=portability.environment(config), capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{chapter.name} under {config.name} failed:\n{done.stderr[-3000:]}")
            raised = " ".join(line for line in done.stderr.splitlines() if line.endswith(" raised"))
            print(f"measured {chapter.name} under {config.name} {raised}", file=sys.stderr, flush=True)
            return config.name, chapter, json.loads(out.read_text())

    found: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:  # one chapter per core
        for config_name, chapter, rooms in pool.map(run, jobs):
            for entry in rooms:
                where = entry["where"]
                place = f"chapters/{chapter.name}" if where.startswith("cell ") else \
                    f"attn_helpers/checks/{where.split(':')[0]}"
                key = f"{place}|{where}|{entry['code']}"
                site = found.setdefault(key, {"file": place, "where": where, "code": entry["code"], "room": {}})
                old = site["room"].get(config_name, math.inf)
                site["room"][config_name] = min(old, float(entry["room"]))
    return found


def main(argv: list[str] | None = None) -> int:
    import portability

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="notebooks (default: every chapter)")
    parser.add_argument("--config", action="append", choices=list(portability.BY_NAME), help="a kernel set")
    parser.add_argument("--write", type=Path, help="also put the tightest tolerances between this file's markers")
    parser.add_argument("--here", nargs=2, type=Path, help=argparse.SUPPRESS)  # one chapter, this environment
    args = parser.parse_args(argv)
    if args.here:
        measure_chapter(*args.here)
        return 0
    chapters = [c.resolve() for c in args.chapters] or book_toc.chapters()
    configs = [portability.BY_NAME[n] for n in args.config] if args.config else portability.CONFIGS
    configs = [c for c in configs if portability.runs_here(c)]
    found = measure(chapters, configs)
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"sites": []}
    measured_files = {f"chapters/{c.name}" for c in chapters} | {f"attn_helpers/checks/ch{c.name[:2]}.py"
                                                                 for c in chapters}
    kept = [s for s in record["sites"] if s["file"] not in measured_files]
    sites = sorted(kept + list(found.values()), key=lambda s: (s["file"], s["where"], s["code"]))
    for site in sites:
        site["room"] = {k: (None if v is None or math.isinf(v) else float(f"{v:.3g}"))
                        for k, v in sorted(site["room"].items())}
    RECORD.write_text(json.dumps({"kernel_sets": [c.name for c in configs], "sites": sites}, indent=1) + "\n")
    short = [s for s in sites if least_room(s) < REQUIRED_ROOM]
    print(f"{len(sites)} tolerances measured; {len(short)} with less than {REQUIRED_ROOM:g}x room:")
    for site in sorted(short, key=least_room):
        print(f"  {least_room(site):8.3g}x  {site['file']} {site['where']}: {site['code'][:100]}")
    if args.write:
        text = args.write.read_text()
        head, rest = text.split(BEGIN)
        args.write.write_text(head + BEGIN + "\n" + tightest_table(sites) + "\n" + END + rest.split(END)[1])
    return 1 if short else 0


BEGIN, END = "<!-- tolerances:begin -->", "<!-- tolerances:end -->"


def tightest_table(sites: list[dict], rows: int = 12) -> str:
    """A Markdown table of the tolerances with the least room, for CONTRIBUTING.md."""
    sets = sorted({name for s in sites for name in s["room"]})
    lines = [f"{len(sites)} tolerances under {len(sets)} kernel sets ({', '.join(sets)}); the {rows} tightest:", "",
             "| where | tolerance | least room |", "|---|---|---|"]
    for site in sorted(sites, key=least_room)[:rows]:
        code = site["code"].replace("|", "\\|")
        where = site["file"] if site["file"].startswith("attn") else site["file"].split("/")[-1]
        name = site["where"].split(":")[1] if site["file"].startswith("attn") else f"cell {site['where'][5:13]}"
        lines.append(f"| {where} ({name}) | `{code}` | {least_room(site):.3g}x |")
    return "\n".join(lines)


def least_room(site: dict) -> float:
    rooms = [math.inf if r is None else r for r in site["room"].values()]
    return min(rooms) if rooms else 0.0


if __name__ == "__main__":
    sys.exit(main())
