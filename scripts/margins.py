"""How much room each trained claim of the book has: its asserted bound, measured over seeds and kernel sets.

    python scripts/margins.py                  # every claim, seeds 0-9, every kernel set of scripts/portability.py
    python scripts/margins.py --chapter 11 --seeds 3

Training through a phase change (an induction head forming) amplifies the last bit of float arithmetic, so a
trained model's accuracy is not the same number on two machines. A chapter states such a result as a bound or a
ranking and asserts exactly that; this script measures the value behind each assert for several seeds under each
kernel set, and prints the smallest and largest value and the room left to the bound. CONTRIBUTING.md holds
its table. A claim (`scripts/claims/`) names the chapter's assert and reads its bound from there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import claims
import portability
from claims import Claim

BEGIN, END = "<!-- margins:begin -->", "<!-- margins:end -->"


def all_claims(chapter: int | None = None) -> list[Claim]:
    """Every claim of every chapter module of ``scripts/claims/`` (or of one chapter), in chapter order."""
    found = []
    for module in sorted(pkgutil.iter_modules(claims.__path__), key=lambda m: m.name):
        found += importlib.import_module(f"{claims.__name__}.{module.name}").CLAIMS
    return [c for c in found if chapter is None or c.chapter == chapter]


def measure_here(chapter: int | None, seeds: list[int]) -> list[list[list[float]]]:
    """Every claim's operands for every seed, in this process (whose kernels the caller's environment chose)."""
    return [[claim.values(seed) for seed in seeds] for claim in all_claims(chapter)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapter", type=int, help="only this chapter's claims")
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 ... N-1 (default 10)")
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
    measured_claims = all_claims(args.chapter)
    command = [sys.executable, __file__, "--here", "--seeds", str(args.seeds)]
    command += ["--chapter", str(args.chapter)] if args.chapter is not None else []

    def measure_under(config: portability.Config) -> list[list[list[float]]]:
        env = portability.environment(config)
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        print(f"measured under {config.name}", file=sys.stderr, flush=True)
        return json.loads(done.stdout.splitlines()[-1])

    values: list[list[list[float]]] = [[] for _ in measured_claims]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two kernel sets at a time, one per core
        for measured in pool.map(measure_under, configs):
            for row, more in zip(values, measured, strict=True):
                row += more
    lines = [f"{len(seeds)} seeds x {len(configs)} kernel sets ({', '.join(c.name for c in configs)}):", "",
             "| chapter | the chapter's assert | smallest | largest | least room |", "|---|---|---|---|---|"]
    failing = 0
    for claim, row in zip(measured_claims, values, strict=True):
        shown = [claim.measured(v) for v in row]
        room = min(claim.room(v) for v in row)
        failing += room <= 0
        assertion = claim.asserts.replace("|", "\\|")
        lines.append(f"| {claim.chapter} | `{assertion}` | {min(shown):.4g} | {max(shown):.4g} | {room:.4g} |")
    print("\n".join(lines))
    if args.write:
        text = args.write.read_text()
        head, rest = text.split(BEGIN)
        args.write.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + rest.split(END)[1])
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
