"""Where the GloVe vectors come from: the shipped subset and its checksums, GloVe's text files and zips, and the
parsed copy kept beside them (chapter 3). The interface a chapter uses, :class:`attn_helpers.GloVe`, is in
``glove/__init__.py``; this file is what it reads.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import io
import itertools
import os
import re
import zipfile
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

import numpy as np

from .. import validate

SUBSET_VECTORS = "glove.6B.50d.subset.npy"
SUBSET_VOCAB = "glove.6B.50d.subset.vocab.txt"
CHECKSUMS = "SHA256SUMS"
DIMS = (50, 100, 200, 300)  # of GloVe 6B
GLOVE_PAGE = "https://nlp.stanford.edu/projects/glove/"
# torchtext's names: the dimensions each comes in, the archive on the GloVe project page, its size
SOURCES = {
    "6B": (DIMS, "glove.6B.zip", "822 MB"),
    "42B": ((300,), "glove.42B.300d.zip", "1.75 GB"),
    "840B": ((300,), "glove.840B.300d.zip", "2.03 GB"),
    "twitter.27B": ((25, 50, 100, 200), "glove.twitter.27B.zip", "1.42 GB"),
}


class GloVeDataError(RuntimeError):
    """A GloVe data file that is missing, truncated or altered (chapter 3)."""


def data_dir() -> Path:
    """The folder with the shipped data (chapter 3): ``$ATTN_HELPERS_DATA`` if set, else ``attn_helpers.data``.

    In a checkout (and an editable install) that is the repository's ``data/``; an installed wheel
    carries the same files inside the package.
    """
    env = os.environ.get("ATTN_HELPERS_DATA")
    if env:
        return Path(env)
    try:
        return Path(str(resources.files("attn_helpers.data")))
    except ModuleNotFoundError:  # a checkout used without installing: the data beside the package
        return Path(__file__).resolve().parents[2] / "data"


def sha256_of(path: Path) -> str:
    """Hex SHA-256 digest of a file, read in 1 MiB blocks (chapter 3: the loader checks GloVe's files by it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_RESTORE = (
    "Restore the shipped files with `git checkout -- data/`, or rebuild them with "
    "`python scripts/make_glove_subset.py` (see data/PROVENANCE.md)."
)


def _verify_checksums(folder: Path, names: Iterable[str]) -> None:
    """Check ``names`` in ``folder`` against ``folder/SHA256SUMS``; raise ``GloVeDataError`` on any mismatch."""
    sums_path = folder / CHECKSUMS
    fix = _RESTORE
    if not sums_path.is_file():
        raise GloVeDataError(f"{sums_path} is missing, so the GloVe data cannot be verified. {fix}")
    expected = {}
    for line in sums_path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            expected[name.lstrip("*")] = digest
    for name in names:
        path = folder / name
        if not path.is_file():
            raise GloVeDataError(f"GloVe data file {path} is missing. {fix}")
        if name not in expected:
            raise GloVeDataError(f"{sums_path} has no checksum for {name}. {fix}")
        actual = sha256_of(path)
        if actual != expected[name]:
            raise GloVeDataError(
                f"GloVe data file {path} is corrupt: its SHA-256 is {actual[:12]}…, "
                f"expected {expected[name][:12]}…. {fix}"
            )


def _read_glove_text(
    source: str | Path | io.BufferedIOBase, dim: int | None = None, max_rows: int | None = None
) -> tuple[list[str], np.ndarray]:
    """Parse GloVe's text format (``word v1 … vd`` per line) into ``(words, vectors (n, d) float32)``.

    Uses pandas' C parser, about ten times faster than splitting lines in Python
    (400,000 × 50 in well under a second). ``source`` is a path or an open binary file;
    ``max_rows`` reads only the first lines. A file with words that contain spaces (a few lines
    of glove.840B) is read line by line instead, taking each line's last ``d`` fields as its vector.
    """
    import pandas as pd

    try:
        frame = pd.read_csv(
            source, sep=" ", header=None, quoting=csv.QUOTE_NONE, keep_default_na=False,
            na_filter=False, dtype={0: str}, engine="c", encoding="utf-8", nrows=max_rows,
        )
    except pd.errors.ParserError as exc:
        if "fields" not in str(exc) or not isinstance(source, (str, Path)):
            raise GloVeDataError(f"{source} is not a GloVe text file: {exc}") from None
        return _read_spaced_words(Path(source), dim, max_rows)
    except (UnicodeDecodeError, ValueError) as exc:
        raise GloVeDataError(
            f"{source} is not a GloVe text file (expected lines of a word and numbers separated by "
            f"single spaces): {exc}"
        ) from None
    try:
        vectors = frame.iloc[:, 1:].to_numpy(dtype=np.float32)
    except ValueError:
        vectors = None
    if vectors is None or np.isnan(vectors).any():
        raise GloVeDataError(f"{source} has lines with missing or non-numeric values; it may be truncated.")
    if dim is not None and vectors.shape[1] != dim:
        raise GloVeDataError(f"{source} holds {vectors.shape[1]}-dimensional vectors, not {dim}.")
    return frame.iloc[:, 0].tolist(), vectors


def _read_spaced_words(path: Path, dim: int | None, max_rows: int | None) -> tuple[list[str], np.ndarray]:
    """The slow path of :func:`_read_glove_text`: split each line from the right, so a word may hold spaces."""
    with open(path, encoding="utf-8") as f:
        lines = list(itertools.islice(f, max_rows))
    dim = dim or min(len(line.split(" ")) for line in lines[:100]) - 1
    rows = [line.rstrip("\n").rsplit(" ", dim) for line in lines]
    if any(len(row) != dim + 1 for row in rows):
        raise GloVeDataError(f"{path} has lines with fewer than {dim} numbers; it may be truncated.")
    try:
        vectors = np.array([row[1:] for row in rows], dtype=np.float32)
    except ValueError:
        raise GloVeDataError(f"{path} has lines with non-numeric values; it is not a GloVe text file.") from None
    return [row[0] for row in rows], vectors


def _read_vectors(path: Path, fix: str, mmap_mode: str | None = None) -> np.ndarray:
    """The array in the ``.npy`` file ``path``, never unpickled; a file that holds no plain array raises
    ``GloVeDataError`` saying so, followed by ``fix`` (how to restore it)."""
    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # a garbled header, a truncated body, not .npy at all
        kind = "its header describes Python objects, not numbers" if "pickle" in str(exc) else str(exc)
        raise GloVeDataError(
            f"GloVe data file {path} is not a valid vector file ({kind}): it was damaged or replaced. {fix}"
        ) from None


def _load_subset(folder: Path) -> tuple[list[str], np.ndarray]:
    _verify_checksums(folder, [SUBSET_VECTORS, SUBSET_VOCAB])
    words = (folder / SUBSET_VOCAB).read_text(encoding="utf-8").split("\n")
    vectors = _read_vectors(folder / SUBSET_VECTORS, _RESTORE)
    if words and words[-1] == "":
        words.pop()
    if vectors.shape != (len(words), 50) or vectors.dtype != np.float32:
        raise GloVeDataError(f"{folder}: {len(words)} words but vectors of shape {vectors.shape}, {vectors.dtype}.")
    return words, vectors


def _where_from(name: str, dim: int) -> str:
    archive, size = SOURCES[name][1:]
    return (
        f"glove.{name}.{dim}d.txt comes in {archive} (about {size}) from the GloVe project page "
        f"{GLOVE_PAGE}; download it, unzip it, and pass the file (or the folder that holds it) as path=..."
    )


def _find_source(location: Path, name: str, dim: int) -> tuple[Path, str | None]:
    """The file to read for GloVe ``name``/``dim`` at ``location`` (a text file, a zip, or a folder):
    (path, zip member)."""
    text = f"glove.{name}.{dim}d.txt"
    if location.is_dir():
        for candidate in (text, SOURCES[name][1], f"glove.{name}.{dim}d.zip"):
            if (location / candidate).is_file():
                return _find_source(location / candidate, name, dim)
        held = sorted(p.name for p in location.iterdir() if re.fullmatch(r"glove\.[\w.]+\.(\d+d\.txt|zip)", p.name))
        raise FileNotFoundError(
            f"No {text} (nor {SOURCES[name][1]}) in the folder {location}; it holds "
            f"{', '.join(held) if held else 'no glove.*.txt or .zip file'}. Pass the name and dim of a file "
            f"that is there (glove.<name>.<dim>d.txt), or its path. {_where_from(name, dim)}"
        )
    if not location.is_file():
        raise FileNotFoundError(f"No GloVe file at {location}. {_where_from(name, dim)}")
    if zipfile.is_zipfile(location):
        with zipfile.ZipFile(location) as archive:
            if text not in archive.namelist():
                raise GloVeDataError(f"{location} has no member {text}; it holds {archive.namelist()}.")
        return location, text
    return location, None


def _cache_files(source: Path, member: str | None, cache: Path) -> tuple[str, Path, Path]:
    """Where the parsed copy of ``source`` goes: ``<name>.<size>-<mtime>.npy`` and ``.vocab.txt`` in ``cache``."""
    stat = source.stat()
    stem = f"{source.name}-{member}" if member else source.name
    key = f"{stat.st_size}-{stat.st_mtime_ns}"
    return stem, cache / f"{stem}.{key}.npy", cache / f"{stem}.{key}.vocab.txt"


def _write_atomically(target: Path, write: Callable[[io.BufferedWriter], object]) -> None:
    """Write ``target`` under a temporary name, then rename it: a reader sees the whole file or none."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        with open(partial, "wb") as f:
            write(f)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _load_text_cached(
    source: Path, member: str | None, dim: int, cache: Path, max_vectors: int | None = None
) -> tuple[list[str], np.ndarray]:
    """GloVe text (a file, or ``member`` of a zip) as ``(words, vectors (n, dim))``, parsed once (chapter 3).

    The first load parses the text and writes a copy to ``cache``: the vectors as ``.npy`` and the
    words beside them, both named after the source's size and modification time (so an edited
    source is parsed again) and each written atomically. Later loads memory-map the ``.npy``; a copy
    that is incomplete or damaged is parsed again.
    ``max_vectors`` keeps the first words only (without a cached copy, only those lines are read).
    """
    stem, vectors_file, vocab_file = _cache_files(source, member, cache)
    if vectors_file.is_file() and vocab_file.is_file():
        try:  # copy-on-write: read lazily, safe to hand to torch
            vectors = _read_vectors(vectors_file, "", mmap_mode="c")
        except GloVeDataError:
            vectors = np.empty((0, dim), dtype=np.float32)  # a damaged copy: parse the text again below
        words = vocab_file.read_text(encoding="utf-8").split("\n")[:-1]
        if len(words) == len(vectors):  # a complete copy
            if vectors.shape[1] != dim:
                raise GloVeDataError(f"{source} holds {vectors.shape[1]}-dimensional vectors, not {dim}.")
            return words[:max_vectors], vectors[:max_vectors]
    if member is None:
        words, vectors = _read_glove_text(source, dim, max_vectors)
    else:
        with zipfile.ZipFile(source) as archive, archive.open(member) as f:
            words, vectors = _read_glove_text(f, dim, max_vectors)
    if max_vectors is None or len(words) < max_vectors:  # the whole file was read: keep a copy
        try:
            cache.mkdir(parents=True, exist_ok=True)
            _write_atomically(vocab_file, lambda f: f.write("".join(w + "\n" for w in words).encode("utf-8")))
            _write_atomically(vectors_file, lambda f: np.save(f, vectors))
            for old in cache.glob(glob.escape(stem) + ".*-*.*"):
                if old not in (vectors_file, vocab_file):
                    old.unlink(missing_ok=True)  # the copy of an earlier version of the source
        except OSError:
            pass  # a read-only folder: no copy, the next load parses again
    return words, vectors


def _check_name_and_dim(name: object, dim: object) -> tuple[str, int]:
    if name not in SOURCES:
        raise ValueError(
            f"Only GloVe {', '.join(map(repr, SOURCES))} exist (torchtext's names), got name={name!r}."
        )
    dims = SOURCES[name][0]
    if dim is None:
        if name == "twitter.27B":
            raise ValueError(f"GloVe twitter.27B comes in dimensions {dims}: pass one, e.g. dim=100.")
        return name, 50 if name == "6B" else 300
    dim = validate.integer(dim, "dim", minimum=1)
    if dim not in dims:
        raise ValueError(f"GloVe {name} comes in dimensions {dims}, got dim={dim}.")
    return name, dim


def _not_shipped(name: str, dim: int) -> str:
    if name == "6B":
        return (
            f"Only the 50-dimensional vectors ship with the book. For dim={dim}, download "
            f"glove.6B.zip (attn_helpers.download.download_glove()) and pass GloVe(dim={dim}, path=...)."
        )
    return f"Only GloVe 6B (50 dimensions) ships with the book. {_where_from(name, dim)}"
