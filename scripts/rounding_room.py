"""How far each number a chapter shows is from turning into another one on another CPU: its rounding room.

    python scripts/rounding_room.py chapters/05_multi_head.ipynb              # four kernel sets, a table per cell
    python scripts/rounding_room.py chapters/05_multi_head.ipynb --show 10    # and the ten tightest numbers

nbval compares a chapter's outputs to the last printed digit. A number printed at n decimals is the same on every
CPU when the last bits that CPUs change cannot carry it across a rounding boundary (…5 at the n + 1st decimal).
This script executes the chapter under each kernel set of scripts/portability.py with a recorder in the kernel that
sees every number as it is rounded for display in a cell whose outputs nbval compares (not one tagged
``nbval-ignore-output`` or ``nbval-skip``, whose numbers, timings say, may differ anyway):

- ``round(x, n)`` called from a code cell or from ``attn_helpers`` (glued values, tables, explorers' ``rounded``
  and decimals), and ``torch.round(x, decimals=n)``;
- a pandas ``DataFrame.round(n)`` or ``Series.round(n)`` called from a code cell or from ``attn_helpers`` (tables),
  and a NumPy array's or a tensor's ``.round(n)`` method called in a code cell: every float element;
- an f-string's ``{x:.nf}``, ``{x:.n%}``, ``{x:.ne}`` or ``{x:.ng}`` in a code cell;
- every element of a float tensor printed at ``torch.set_printoptions``'s precision;
- every choice of ``argmax`` or ``argmin`` (``torch.``'s or a tensor's) called from a code cell or from ``attn_helpers``
  (the predictions an accuracy counts, a row's favourite key): its margin, the largest value less the second (the
  second smallest less the smallest), is its distance from choosing another.

For each number it takes the spread of its value over the kernel sets and its distance from the nearest rounding
boundary (the smallest over the sets), and prints, per cell, the smallest ratio distance / spread: how many times
the kernel sets' own disagreement would have to grow before another CPU could print another digit. A cell whose
numbers are bit-identical under every set has no ratio (its smallest distance is printed). A count made otherwise
than by ``argmax`` (a threshold, ``max``'s indices, ``topk``) is not seen, nor is a float that pandas or NumPy prints at
its own display precision without a ``round`` first; the trained claims' margins bound what training can move.
A choice's margin is not its count's room: a tie between candidates that count alike (two copies of one word)
shows as no room, and so does a choice at a position the count leaves out. Where the table says too little,
measure what decides the count (the right answer's score less the best other one's).
Exits 1 when a ratio is below ``--room`` (default 10).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import math
import re
import subprocess
import sys
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = str(ROOT / "attn_helpers")
SPEC = re.compile(r"^[^.]*\.(\d+)([fe%g])$")  # a format spec with a precision: ".3f", ">8.2%", ",.1e"
REQUIRED_ROOM = 10.0
ARGMAX = -1  # the "decimals" of an argmax's margin: its distance from another choice is the margin itself
UNCHECKED = {"nbval-ignore-output", "nbval-skip"}  # tags of cells whose outputs nbval does not compare


def decimals_shown(value: float, precision: int, kind: str) -> int:
    """The decimal place (of ``value`` itself) at which a format of ``precision`` and ``kind`` rounds it."""
    if kind == "%":
        return precision + 2
    if kind in "eg" and value != 0:
        digits = precision if kind == "e" else max(precision, 1) - 1
        return digits - math.floor(math.log10(abs(value)))
    return precision


def boundary_distance(value: float, decimals: int) -> float:
    """How far ``value`` is from the nearest rounding boundary at ``decimals`` places (exact, in decimal)."""
    scaled = Decimal(value).scaleb(decimals)
    fraction = scaled - scaled.to_integral_value(rounding=ROUND_FLOOR)
    return float(abs(fraction - Decimal("0.5")).scaleb(-decimals))


# ------------------------------------------------------------------ the recorder, installed in the chapter's kernel

class Recorder(ast.NodeTransformer):
    """Records each number rounded for display: (cell, where, value, decimals), in the order the chapter shows them."""

    def __init__(self, cells: dict[str, str]) -> None:
        self.cells = cells                          # source -> cell id
        self.cell: str | None = None
        self.records: list[tuple[str, str, float, int]] = []

    def pre_run_cell(self, info) -> None:  # noqa: ANN001
        self.cell = self.cells.get(info.raw_cell)

    def add(self, where: str, value: object, decimals: int) -> None:
        if self.cell is not None and isinstance(value, float) and math.isfinite(value):
            self.records.append((self.cell, where, value, decimals))

    # f-strings of the chapter's cells
    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        self.generic_visit(node)
        spec = node.format_spec
        if (self.cell is not None and isinstance(spec, ast.JoinedStr) and len(spec.values) == 1
                and isinstance(spec.values[0], ast.Constant) and SPEC.match(str(spec.values[0].value))):
            text = spec.values[0].value
            where = f"line {node.lineno}: {{{ast.unparse(node.value)}:{text}}}"
            node.value = ast.Call(ast.Attribute(ast.Name("__rounding__", ast.Load()), "formatted", ast.Load()),
                                  [node.value, ast.Constant(text), ast.Constant(where)], [])
        return node

    def formatted(self, value: object, spec: str, where: str) -> object:
        number = _as_float(value)
        if number is not None:
            precision, kind = SPEC.match(spec).groups()
            self.add(where, number, decimals_shown(number, int(precision), kind))
        return value

    # a cell's x.round(n): a NumPy array's or a tensor's (pandas' are watched where pandas defines them)
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if self.cell is not None and isinstance(node.func, ast.Attribute) and node.func.attr == "round":
            where = f"line {node.lineno}"
            node.func = ast.Call(ast.Attribute(ast.Name("__rounding__", ast.Load()), "method", ast.Load()),
                                 [node.func.value, ast.Constant(where)], [])
        return node

    def method(self, owner: object, where: str):  # noqa: ANN201
        """``owner.round``, recording the float elements of a NumPy array or a tensor it rounds to ``n`` decimals."""
        if isinstance(owner, types.ModuleType):  # torch.round (watched itself), np.round
            return owner.round

        def round(*args, **kwargs):  # noqa: A001, ANN002, ANN003, ANN202
            decimals = args[0] if args else kwargs.get("decimals", 0)
            if isinstance(decimals, int) and decimals and not type(owner).__module__.startswith("pandas"):
                for value in _elements(owner):
                    self.add(f"{where}: .round({decimals})", value, decimals)
            return owner.round(*args, **kwargs)

        return round

    def watch_pandas_round(self, original):  # noqa: ANN001, ANN201
        def round(frame, decimals=0, *args, **kwargs):  # noqa: A001, ANN001, ANN002, ANN003, ANN202
            if isinstance(decimals, int) and decimals and (where := _caller(sys._getframe(1))):
                for value in _elements(frame):
                    self.add(f"{where}: {type(frame).__name__}.round({decimals})", value, decimals)
            return original(frame, decimals, *args, **kwargs)

        return round

    # round() and torch.round from the chapter or the package
    def watch_round(self, original):  # noqa: ANN001, ANN201
        def round(number, ndigits=None):  # noqa: A001, ANN001, ANN202
            result = original(number) if ndigits is None else original(number, ndigits)
            if ndigits is not None and (where := _caller(sys._getframe(1))):
                number = _as_float(number)
                if number is not None:
                    self.add(f"{where}: round(…, {ndigits})", number, ndigits)
            return result

        return round

    def watch_torch_round(self, original):  # noqa: ANN001, ANN201
        def round(input, *args, decimals=0, **kwargs):  # noqa: A001, A002, ANN001, ANN202
            result = original(input, *args, decimals=decimals, **kwargs)
            if decimals and input.is_floating_point() and (where := _caller(sys._getframe(1))):
                for value in input.detach().double().flatten().tolist():
                    self.add(f"{where}: torch.round(…, decimals={decimals})", value, decimals)
            return result

        return round

    def watch_argmax(self, original, name: str = "argmax"):  # noqa: ANN001, ANN201
        """``original`` (an argmax, or with ``name="argmin"`` an argmin), recording each choice's margin."""
        sign = -1.0 if name == "argmin" else 1.0

        def argmax(input, dim=None, keepdim=False):  # noqa: A002, ANN001, ANN202
            result = original(input, dim=dim, keepdim=keepdim)
            if input.is_floating_point() and (where := _caller(sys._getframe(1))):
                values = sign * input.detach().double()
                values, along = (values.flatten(), 0) if dim is None else (values, dim)
                if values.dim() and values.shape[along] > 1:
                    top = values.topk(2, dim=along).values  # (..., 2, ...): the two largest along the dimension
                    for margin in (top.narrow(along, 0, 1) - top.narrow(along, 1, 1)).flatten().tolist():
                        self.add(f"{where}: {name}", margin, ARGMAX)
            return result

        return argmax

    def watch_printing(self, original):  # noqa: ANN001, ANN201
        from torch._tensor_str import PRINT_OPTS

        def format(formatter, value):  # noqa: A001, ANN001, ANN202
            if formatter.floating_dtype and not formatter.int_mode:
                kind = "e" if formatter.sci_mode else "f"
                self.add(f"printed tensor ({kind}, precision {PRINT_OPTS.precision})", float(value),
                         decimals_shown(float(value), PRINT_OPTS.precision, kind))
            return original(formatter, value)

        return format


def _caller(frame) -> str | None:  # noqa: ANN001
    """Where a frame is, if it is a chapter's cell (IPython compiles them to ipykernel_* files) or the package's."""
    file = frame.f_code.co_filename
    if "ipykernel_" in file or file.startswith("<ipython-input"):
        return f"line {frame.f_lineno}"
    if file.startswith(PACKAGE):
        return f"{Path(file).relative_to(ROOT)}:{frame.f_lineno}"
    return None


def _as_float(x: object) -> float | None:
    """A Python or NumPy float, or a one-element float tensor, as a float; anything else (ints, strings) None."""
    if hasattr(x, "numel") and hasattr(x, "is_floating_point"):
        return float(x) if x.numel() == 1 and x.is_floating_point() else None
    if isinstance(x, float) or type(x).__name__ in ("float32", "float64", "float16"):
        return float(x)
    return None


def _elements(x: object) -> list[float]:
    """The float elements of a tensor, a NumPy array, or a pandas Series or DataFrame (its float columns), row by row;
    nothing for anything else."""
    if hasattr(x, "is_floating_point") and hasattr(x, "detach"):  # a tensor
        return x.detach().double().flatten().tolist() if x.is_floating_point() else []
    if type(x).__name__ == "DataFrame":
        floats = x.select_dtypes("floating")
        return [float(v) for v in floats.to_numpy().flatten()] if floats.size else []
    dtype = getattr(x, "dtype", None)
    if getattr(dtype, "kind", None) == "f":  # a NumPy array or a pandas Series of floats
        return [float(v) for v in getattr(x, "to_numpy", lambda: x)().flatten()]
    return []


def install(shell, cells: dict[str, str]) -> Recorder:  # noqa: ANN001
    """Put a recorder in an IPython kernel."""
    import pandas as pd
    import torch
    import torch._tensor_str

    recorder = Recorder(cells)
    shell.user_ns["__rounding__"] = recorder
    shell.events.register("pre_run_cell", recorder.pre_run_cell)
    shell.ast_transformers.append(recorder)
    builtins.round = recorder.watch_round(builtins.round)
    torch.round = recorder.watch_torch_round(torch.round)
    for name in ("argmax", "argmin"):
        setattr(torch, name, recorder.watch_argmax(getattr(torch, name), name))
        setattr(torch.Tensor, name, recorder.watch_argmax(getattr(torch.Tensor, name), name))
    formatter = torch._tensor_str._Formatter
    formatter.format = recorder.watch_printing(formatter.format)
    for kind in (pd.DataFrame, pd.Series):
        kind.round = recorder.watch_pandas_round(kind.round)
    return recorder


def write_records(recorder: Recorder, out: str) -> None:
    Path(out).write_text(json.dumps(recorder.records))


def measure_chapter(chapter: Path, out: Path) -> None:
    """Execute one chapter with the recorder, in this process's environment, and write its records to ``out``."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(chapter, as_version=4)
    cells = {"".join(c.source): c.id for c in nb.cells if c.cell_type == "code" and not unchecked(c)}
    setup = (f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import rounding_room as _r; "
             f"_recorder = _r.install(get_ipython(), {cells!r})")
    nb.cells = [nbformat.v4.new_code_cell(setup), *nb.cells,
                nbformat.v4.new_code_cell(f"_r.write_records(_recorder, {str(out)!r})")]
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(chapter.parent)}}).execute()


def unchecked(cell) -> bool:  # noqa: ANN001
    """Does nbval leave this cell's outputs uncompared (tagged ``nbval-ignore-output`` or ``nbval-skip``)?"""
    return bool(UNCHECKED & set(cell.get("metadata", {}).get("tags", [])))


# ------------------------------------------------------------------ across the kernel sets

def measure(chapter: Path, configs: list) -> dict[str, list]:
    """{kernel set: [(cell, where, value, decimals), ...]} for one chapter."""
    import portability

    def run(config) -> tuple[str, list]:  # noqa: ANN001
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "records.json"
            done = subprocess.run([sys.executable, __file__, "--here", str(chapter), str(out)], cwd=ROOT,
                                  env=portability.environment(config), capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{chapter.name} under {config.name} failed:\n{done.stderr[-3000:]}")
            print(f"measured {chapter.name} under {config.name}", file=sys.stderr, flush=True)
            return config.name, json.loads(out.read_text())

    with ThreadPoolExecutor(max_workers=2) as pool:  # one kernel per core
        return dict(pool.map(run, configs))


def rooms(measured: dict[str, list]) -> list[dict]:
    """Each number shown, in order: its cell, where, decimals, values per set, spread, distance and ratio."""
    runs = list(measured.values())
    shown = [[tuple(record[:2]) for record in run] for run in runs]  # (cell, where) of each number, in order
    if any(sequence != shown[0] for sequence in shown[1:]):
        raise RuntimeError("the kernel sets showed different sequences of numbers: compare the chapter's outputs "
                           "with scripts/portability.py first")
    numbers, seen = [], set()
    for records in zip(*runs, strict=True):  # one number, as each kernel set computed it
        cell, where, _, decimals = records[0]
        values = [value for _, _, value, _ in records]
        key = (cell, where, decimals, *values)
        if key in seen:  # the same number rounded again (an explorer's view, then its data)
            continue
        seen.add(key)
        spread = max(values) - min(values)
        distance = min(v if decimals == ARGMAX else boundary_distance(v, decimals) for v in values)
        numbers.append({"cell": cell, "where": where, "decimals": decimals, "values": values, "spread": spread,
                        "distance": distance, "ratio": math.inf if spread == 0 else distance / spread})
    return numbers


def report(numbers: list[dict], show: int = 0) -> list[str]:
    """A Markdown table, one row per cell: numbers shown, largest spread, smallest distance and smallest ratio."""
    lines = ["| cell | numbers | largest spread | smallest distance | least ratio (distance / spread) |",
             "|---|---|---|---|---|"]
    cells = dict.fromkeys(n["cell"] for n in numbers)
    for cell in cells:
        mine = [n for n in numbers if n["cell"] == cell]
        worst = min(mine, key=lambda n: (n["ratio"], n["distance"]))
        ratio = "identical" if math.isinf(worst["ratio"]) else f"{worst['ratio']:.3g} ({worst['where']})"
        lines.append(f"| {cell} | {len(mine)} | {max(n['spread'] for n in mine):.3g} | "
                     f"{min(n['distance'] for n in mine):.3g} | {ratio} |")
    if show:
        lines += ["", f"The {show} tightest numbers:"]
        for n in sorted(numbers, key=lambda n: (n["ratio"], n["distance"]))[:show]:
            shown = "as a margin" if n["decimals"] == ARGMAX else f"at {n['decimals']} decimals"
            lines.append(f"  cell {n['cell']} {n['where']}: {n['values'][0]!r} {shown}, "
                         f"spread {n['spread']:.3g}, distance {n['distance']:.3g}, ratio {n['ratio']:.3g}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import portability

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", type=Path, nargs="?", help="a notebook")
    parser.add_argument("--config", action="append", choices=list(portability.BY_NAME), help="a kernel set")
    parser.add_argument("--show", type=int, default=0, help="also list the N numbers with the least room")
    parser.add_argument("--room", type=float, default=REQUIRED_ROOM, help="the least ratio that passes")
    parser.add_argument("--here", nargs=2, type=Path, help=argparse.SUPPRESS)  # one chapter, this environment
    args = parser.parse_args(argv)
    if args.here:
        measure_chapter(*args.here)
        return 0
    if args.chapter is None:
        parser.error("name a chapter's notebook")
    configs = [portability.BY_NAME[n] for n in args.config] if args.config else portability.CONFIGS
    configs = [c for c in configs if portability.runs_here(c)]
    numbers = rooms(measure(args.chapter.resolve(), configs))
    print(f"{args.chapter.name}: {len(numbers)} numbers shown, under {', '.join(c.name for c in configs)}\n")
    print("\n".join(report(numbers, args.show)))
    short = [n for n in numbers if n["ratio"] < args.room]
    print(f"\n{len(short)} numbers with a ratio below {args.room:g}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
