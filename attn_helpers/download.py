"""Download the official GloVe 6B archive for readers who are online and want 100-300 dimensions (chapter 3).

Part of the GloVe idea, kept beside ``glove`` rather than in it: no chapter runs it (the book ships
its vectors), it is the one module that touches the network, and ``glove`` is long enough already.
"""

from __future__ import annotations

import os
import urllib.request
import zipfile
from pathlib import Path

from tqdm.auto import tqdm

from .glove import GloVeDataError, sha256_of

__all__ = ["GLOVE_6B_URL", "GLOVE_6B_SIZE", "download_glove"]

GLOVE_6B_URL = "https://nlp.stanford.edu/data/glove.6B.zip"
GLOVE_6B_SIZE = 862_182_613  # bytes, as served by Stanford


def _default_cache() -> Path:
    """``$ATTN_HELPERS_CACHE`` if set, else ``~/.cache/attn_helpers``."""
    return Path(os.environ.get("ATTN_HELPERS_CACHE", Path.home() / ".cache" / "attn_helpers"))


def _check_archive(path: Path, sha256: str | None) -> str:
    """Verify ``path`` and return its SHA-256: against ``sha256`` if given, always the zip's own CRC-32s."""
    digest = sha256_of(path)
    if sha256 is not None and digest != sha256.lower():
        raise GloVeDataError(
            f"{path} has SHA-256 {digest}, expected {sha256}: the download is corrupt or not the "
            f"file you meant. Delete it and download again."
        )
    if not zipfile.is_zipfile(path):
        raise GloVeDataError(f"{path} is not a zip archive. Delete it and download again.")
    with zipfile.ZipFile(path) as archive:
        bad = archive.testzip()  # reads every member and checks its CRC-32
    if bad is not None:
        raise GloVeDataError(f"{path}: member {bad} fails its CRC check. Delete the file and download again.")
    return digest


def download_glove(
    url: str = GLOVE_6B_URL,
    sha256: str | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` (by default the official ``glove.6B.zip``) into the cache; returns its path (chapter 3).

    A file already in the cache is verified and reused, not fetched again. The archive is
    checked against ``sha256`` when one is given and, always, against the CRC-32 that zip
    stores for each member; the SHA-256 it was accepted with is kept beside it in
    ``<name>.sha256`` so that later calls notice a changed file. Shows a progress bar.
    Use the result as ``GloVe(dim=100, path=download_glove())``.
    """
    folder = Path(cache_dir) if cache_dir is not None else _default_cache()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / url.rstrip("/").rsplit("/", 1)[-1]
    record = target.with_name(target.name + ".sha256")
    if target.exists():
        known = sha256 or (record.read_text().strip() if record.exists() else None)
        _check_archive(target, known)
        return target
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with open(partial, "wb") as out, tqdm(
                total=total, unit="B", unit_scale=True, desc=target.name, disable=not progress
            ) as bar:
                for block in iter(lambda: response.read(1 << 20), b""):
                    out.write(block)
                    bar.update(len(block))
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConnectionError(
            f"Could not download {url}: {exc}. The book itself needs no download: the 50-dimensional "
            f"vectors ship in data/. For other dimensions, fetch glove.6B.zip by hand and pass its path."
        ) from None
    try:
        digest = _check_archive(partial, sha256)
    except GloVeDataError:
        partial.unlink(missing_ok=True)
        raise
    partial.rename(target)
    record.write_text(digest + "\n")
    return target
