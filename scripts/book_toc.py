"""The files of _toc.yml in reading order, shared by the scripts and the tests."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def toc_files(root: Path = ROOT) -> list[str]:
    """Every ``file:`` entry of ``root/_toc.yml``, the root page first, without suffixes (e.g. ``chapters/01_x``)."""

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for key, value in node.items():
                if key != "file":
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return [toc["root"], *walk({k: v for k, v in toc.items() if k != "root"})]
