"""How much room each trained claim of the book has: its asserted bound, measured over seeds and kernel sets.

    python scripts/margins.py                  # every claim, seeds 0-4, every kernel set of scripts/portability.py
    python scripts/margins.py --chapter 11 --seeds 3

Training through a phase change (an induction head forming) amplifies the last bit of float arithmetic, so a
trained model's accuracy is not the same number on two machines. A chapter states such a result as a bound or a
ranking and asserts exactly that; this script measures the value behind each assert for several seeds under each
kernel set, and prints the smallest and largest value and the room left to the bound. CONTRIBUTING.md holds
its table. A claim is a function of the seed in `scripts/claims/chNN.py` (listed in that module's CLAIMS).
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import portability

BEGIN, END = "<!-- margins:begin -->", "<!-- margins:end -->"


@dataclass(frozen=True)
class Claim:
    chapter: int
    text: str                            # the claim as the chapter states it, e.g. "RoPE's accuracy at 2x > 0.80"
    measure: Callable[[int], float]      # seed -> the value the chapter's assert compares
    low: float | None = None             # the assert: low < value (None: no lower bound)
    high: float | None = None            # the assert: value < high

    def room(self, value: float) -> float:
        """How far `value` is inside the bound (negative: the claim fails)."""
        sides = [value - self.low] if self.low is not None else []
        sides += [self.high - value] if self.high is not None else []
        return min(sides)


def all_claims(chapter: int | None = None) -> list[Claim]:
    import claims

    found = []
    for module in pkgutil.iter_modules(claims.__path__):
        found += importlib.import_module(f"claims.{module.name}").CLAIMS
    return [c for c in found if chapter is None or c.chapter == chapter]


def measure_here(chapter: int | None, seeds: list[int]) -> list[list[float]]:
    """Every claim's value for every seed, in this process (whose kernels the caller's environment chose)."""
    return [[claim.measure(seed) for seed in seeds] for claim in all_claims(chapter)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapter", type=int, help="only this chapter's claims")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 ... N-1 (default 5)")
    parser.add_argument("--config", action="append", choices=list(portability.BY_NAME),
                        help="a kernel set (repeatable; default: all)")
    parser.add_argument("--write", type=Path, help="also put the table between the margins markers of this file")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # one kernel set, as JSON
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    if args.here:
        print(json.dumps(measure_here(args.chapter, seeds)))
        return 0
    configs = [portability.BY_NAME[n] for n in args.config] if args.config else portability.CONFIGS
    claims = all_claims(args.chapter)
    command = [sys.executable, __file__, "--here", "--seeds", str(args.seeds)]
    command += ["--chapter", str(args.chapter)] if args.chapter is not None else []

    def measure_under(config: portability.Config) -> list[list[float]]:
        env = portability.environment(config)
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        print(f"measured under {config.name}", file=sys.stderr, flush=True)
        return json.loads(done.stdout.splitlines()[-1])

    values: list[list[float]] = [[] for _ in claims]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two kernel sets at a time, one per core
        for measured in pool.map(measure_under, configs):
            for row, more in zip(values, measured, strict=True):
                row += more
    lines = [f"{len(seeds)} seeds x {len(configs)} kernel sets ({', '.join(c.name for c in configs)}):", "",
             "| chapter | claim (asserted) | smallest | largest | least room |", "|---|---|---|---|---|"]
    failing = 0
    for claim, row in zip(claims, values, strict=True):
        room = min(claim.room(v) for v in row)
        failing += room <= 0
        lines.append(f"| {claim.chapter} | {claim.text} | {min(row):.4g} | {max(row):.4g} | {room:.4g} |")
    print("\n".join(lines))
    if args.write:
        text = args.write.read_text()
        head, rest = text.split(BEGIN)
        args.write.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + rest.split(END)[1])
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
