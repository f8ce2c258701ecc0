"""GloVe word vectors with the interface of ``torchtext.vocab.GloVe`` (chapter 3).

torchtext is no longer maintained and does not load with current PyTorch, so the book
ships the same interface here. Where an old tutorial writes
``from torchtext.vocab import GloVe``, write ``from attn_helpers import GloVe`` instead.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import os
import re
import zipfile
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import numpy as np
import torch

SUBSET_VECTORS = "glove.6B.50d.subset.npy"
SUBSET_VOCAB = "glove.6B.50d.subset.vocab.txt"
CHECKSUMS = "SHA256SUMS"
DIMS = (50, 100, 200, 300)


class OutOfVocabularyError(KeyError):
    """A word that the loaded GloVe vocabulary does not contain."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class GloVeDataError(RuntimeError):
    """A GloVe data file that is missing, truncated or altered."""


def data_dir() -> Path:
    """The folder with the shipped data: ``$ATTN_HELPERS_DATA`` if set, else the package's ``attn_helpers.data``.

    In a checkout (and an editable install) that is the repository's ``data/``; an installed wheel
    carries the same files inside the package.
    """
    env = os.environ.get("ATTN_HELPERS_DATA")
    if env:
        return Path(env)
    try:
        return Path(str(resources.files("attn_helpers.data")))
    except ModuleNotFoundError:  # a checkout used without installing: the data beside the package
        return Path(__file__).resolve().parent.parent / "data"


def sha256_of(path: Path) -> str:
    """Hex SHA-256 digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_checksums(folder: Path, names: Iterable[str]) -> None:
    """Check ``names`` in ``folder`` against ``folder/SHA256SUMS``; raise ``GloVeDataError`` on any mismatch."""
    sums_path = folder / CHECKSUMS
    fix = (
        "Restore the shipped files with `git checkout -- data/`, or rebuild them with "
        "`python scripts/make_glove_subset.py` (see data/PROVENANCE.md)."
    )
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


def read_glove_text(source: str | Path | io.BufferedIOBase, dim: int | None = None) -> tuple[list[str], np.ndarray]:
    """Parse GloVe's text format (``word v1 … vd`` per line) into ``(words, vectors (n, d) float32)``.

    Uses pandas' C parser, about ten times faster than splitting lines in Python
    (400,000 × 50 in well under 1.5 s). ``source`` is a path or an open binary file.
    """
    import pandas as pd

    try:
        frame = pd.read_csv(
            source, sep=" ", header=None, quoting=csv.QUOTE_NONE, keep_default_na=False,
            na_filter=False, dtype={0: str}, engine="c", encoding="utf-8",
        )
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
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


def _load_subset(folder: Path) -> tuple[list[str], np.ndarray]:
    verify_checksums(folder, [SUBSET_VECTORS, SUBSET_VOCAB])
    words = (folder / SUBSET_VOCAB).read_text(encoding="utf-8").split("\n")
    vectors = np.load(folder / SUBSET_VECTORS)
    if words and words[-1] == "":
        words.pop()
    if vectors.shape != (len(words), 50) or vectors.dtype != np.float32:
        raise GloVeDataError(f"{folder}: {len(words)} words but vectors of shape {vectors.shape}, {vectors.dtype}.")
    return words, vectors


def _load_path(path: Path, dim: int) -> tuple[list[str], np.ndarray]:
    if not path.exists():
        raise FileNotFoundError(f"No GloVe file at {path}. Pass the path of glove.6B.{dim}d.txt or glove.6B.zip.")
    if zipfile.is_zipfile(path):
        member = f"glove.6B.{dim}d.txt"
        with zipfile.ZipFile(path) as archive:
            if member not in archive.namelist():
                raise GloVeDataError(f"{path} has no member {member}; it holds {archive.namelist()}.")
            with archive.open(member) as f:
                return read_glove_text(f, dim)
    return read_glove_text(path, dim)


class GloVe:
    """Pre-trained GloVe vectors, used like ``torchtext.vocab.GloVe(name='6B', dim=50)`` (chapter 3).

    With no ``path`` it loads the 50-dimensional subset shipped in ``data/`` (the most frequent
    words of GloVe 6B plus every word the chapters use), offline, checking its SHA-256.
    With ``path`` it reads an official ``glove.6B.<dim>d.txt`` or ``glove.6B.zip``.

    Attributes as in torchtext: ``itos`` (list of words), ``stoi`` (word -> row),
    ``vectors`` ``(n, dim)`` float32, ``dim``. One difference: an unknown word raises
    :class:`OutOfVocabularyError` that names it and suggests close words, where torchtext
    silently returned a vector of zeros.
    """

    def __init__(self, name: str = "6B", dim: int = 50, path: str | Path | None = None) -> None:
        if name != "6B":
            raise ValueError(f"Only GloVe '6B' is supported, got name={name!r}.")
        if dim not in DIMS:
            raise ValueError(f"GloVe 6B comes in dimensions {DIMS}, got dim={dim}.")
        if path is None and dim != 50:
            raise ValueError(
                f"Only the 50-dimensional vectors ship with the book. For dim={dim}, download "
                f"glove.6B.zip (attn_helpers.download_glove()) and pass GloVe(dim={dim}, path=...)."
            )
        words, vectors = _load_subset(data_dir()) if path is None else _load_path(Path(path), dim)
        self.name, self.dim = name, dim
        self.itos: list[str] = words
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(words)}
        self.vectors = torch.from_numpy(vectors)  # (n, dim)
        self._unit: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        return f"GloVe(name={self.name!r}, dim={self.dim}, words={len(self):,})"

    def suggest(self, token: str, n: int = 5) -> list[str]:
        """Up to ``n`` vocabulary words spelled like ``token`` (for error messages)."""
        size = len(token)
        pool = [w for w in self.itos[:50_000] if abs(len(w) - size) <= 2]
        return difflib.get_close_matches(token.lower(), pool, n=n, cutoff=0.7)

    def __getitem__(self, token: str) -> torch.Tensor:
        """The vector of ``token``, shape ``(dim,)``."""
        if not isinstance(token, str):
            raise TypeError(f"Look words up by string, got {type(token).__name__}: {token!r}.")
        index = self.stoi.get(token)
        if index is None:
            hint = ""
            if token.lower() in self.stoi:
                hint = f" GloVe 6B is lower-case: try {token.lower()!r}."
            else:
                close = self.suggest(token)
                hint = f" Close words: {', '.join(close)}." if close else " No close word found."
            raise OutOfVocabularyError(f"{token!r} is not in the GloVe vocabulary ({len(self):,} words).{hint}")
        return self.vectors[index]

    def get_vecs_by_tokens(self, tokens: str | list[str], lower_case_backup: bool = False) -> torch.Tensor:
        """Vectors of ``tokens`` as ``(len(tokens), dim)``, or ``(dim,)`` for a single string, as in torchtext."""
        if isinstance(tokens, str):
            return self.get_vecs_by_tokens([tokens], lower_case_backup)[0]
        if len(tokens) == 0:
            raise ValueError("get_vecs_by_tokens got an empty list of tokens.")
        if lower_case_backup:
            tokens = [t if t in self.stoi else t.lower() for t in tokens]
        return torch.stack([self[t] for t in tokens])

    def embed(self, sentence: str | list[str]) -> torch.Tensor:
        """The sentence as a matrix X of shape ``(t, dim)``, one row per token (see :func:`tokenize`)."""
        tokens = tokenize(sentence) if isinstance(sentence, str) else list(sentence)
        if not tokens:
            raise ValueError("The sentence is empty: there is nothing to embed.")
        missing = [t for t in tokens if t not in self.stoi]
        if missing:
            self[missing[0]]  # raises OutOfVocabularyError naming the first unknown word
        return self.get_vecs_by_tokens(tokens)

    def nearest(self, query: str | torch.Tensor, k: int = 5, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The ``k`` words whose vectors have the highest cosine similarity to ``query`` (a word or a ``(dim,)`` vector).

        A word query leaves itself out of the answer. Returns ``[(word, cosine), …]``, best first.
        """
        skip = set(exclude)
        if isinstance(query, str):
            skip.add(query)
            query = self[query]
        if not isinstance(query, torch.Tensor) or query.shape != (self.dim,):
            raise ValueError(f"query must be a word or a vector of shape ({self.dim},).")
        if self._unit is None:
            self._unit = torch.nn.functional.normalize(self.vectors, dim=1)
        scores = self._unit @ torch.nn.functional.normalize(query.float(), dim=0)
        best = torch.topk(scores, k + len(skip)).indices.tolist()
        return [(self.itos[i], round(float(scores[i]), 4)) for i in best if self.itos[i] not in skip][:k]


def tokenize(sentence: str) -> list[str]:
    """Lower-case ``sentence`` and split it into words and punctuation marks, as GloVe 6B was tokenised."""
    if not isinstance(sentence, str):
        raise TypeError(f"tokenize takes a string, got {type(sentence).__name__}.")
    return re.findall(r"[\w]+(?:'[\w]+)?|[^\w\s]", sentence.lower())


def cosine_similarity(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine similarity between the rows of ``a`` ``(n, d)`` and of ``b`` ``(m, d)`` (default ``a``): ``(n, m)``.

    One-dimensional inputs are treated as single rows.
    """
    b = a if b is None else b
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or not torch.is_floating_point(t):
            raise TypeError(f"{name} must be a floating-point tensor.")
    a2, b2 = a.reshape(1, -1) if a.dim() == 1 else a, b.reshape(1, -1) if b.dim() == 1 else b
    if a2.dim() != 2 or b2.dim() != 2 or a2.shape[1] != b2.shape[1]:
        raise ValueError(f"cosine_similarity needs (n, d) and (m, d) with the same d; got {tuple(a.shape)}, {tuple(b.shape)}.")
    if (a2.norm(dim=1) == 0).any() or (b2.norm(dim=1) == 0).any():
        raise ValueError("A zero vector has no direction, so its cosine similarity is undefined.")
    f = torch.nn.functional.normalize
    return f(a2, dim=1) @ f(b2, dim=1).T
