"""GloVe word vectors with the interface of ``torchtext.vocab.GloVe`` (chapter 3).

torchtext is no longer maintained and does not load with current PyTorch, so the book
ships the same interface here. Where an old tutorial writes
``from torchtext.vocab import GloVe``, write ``from attn_helpers import GloVe`` instead.

The files behind it (the shipped subset, GloVe's text files, checksums and the parsed copy) are read by
``glove/_files.py``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

import torch

from .. import validate
from ._files import (
    CHECKSUMS,
    DIMS,
    GLOVE_PAGE,
    SOURCES,
    SUBSET_VECTORS,
    SUBSET_VOCAB,
    GloVeDataError,
    _check_name_and_dim,
    _find_source,
    _load_subset,
    _load_text_cached,
    _not_shipped,
    data_dir,
    sha256_of,
)

__all__ = [
    "SUBSET_VECTORS",
    "SUBSET_VOCAB",
    "CHECKSUMS",
    "DIMS",
    "GLOVE_PAGE",
    "SOURCES",
    "OutOfVocabularyError",
    "GloVeDataError",
    "data_dir",
    "sha256_of",
    "GloVe",
    "tokenize",
    "cosine_similarity",
]

# How far below the k-th float32 cosine nearest() still looks: far more than float32's error in a cosine of two
# unit vectors of d numbers (about d × 6e-8), so the shortlist holds every word the float64 cosines rank first.
_SLACK = 1e-3


class OutOfVocabularyError(KeyError):
    """A word that the loaded GloVe vocabulary does not contain (chapter 3)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class GloVe:
    """Pre-trained GloVe vectors, used like ``torchtext.vocab.GloVe(name='6B', dim=50)`` (chapter 3).

    With no ``path`` or ``cache`` it loads the 50-dimensional subset shipped in ``data/`` (the most
    frequent words of GloVe 6B plus every word the chapters use), offline, checking its SHA-256.

    Other vectors are read from a file you download: ``path`` is a ``glove.<name>.<dim>d.txt``,
    the zip it comes in, or the folder that holds either; ``cache`` is a folder as torchtext's
    ``.vector_cache`` (searched when ``path`` is not given, and where the parsed copy is kept).
    torchtext's names and dimensions, and the archives on the GloVe project page
    (https://nlp.stanford.edu/projects/glove/):

    - ``name='6B'``: ``dim`` 50, 100, 200 or 300; ``glove.6B.zip``, about 822 MB.
    - ``name='42B'``: ``dim`` 300 (the default); ``glove.42B.300d.zip``, about 1.75 GB.
    - ``name='840B'``: ``dim`` 300 (the default); ``glove.840B.300d.zip``, about 2.03 GB.
    - ``name='twitter.27B'``: ``dim`` 25, 50, 100 or 200; ``glove.twitter.27B.zip``, about 1.42 GB.

    A text file is parsed once (under a second for 400,000 × 50) and kept as a memory-mapped
    ``.npy`` beside it, or in ``cache``, named after the text file's size and modification time, so
    later loads take a fraction of a second. ``max_vectors`` keeps only the first (most frequent) words.

    Attributes as in torchtext: ``itos`` (list of words), ``stoi`` (word -> row),
    ``vectors`` ``(n, dim)`` float32, ``dim``. One difference: an unknown word raises
    :class:`OutOfVocabularyError` that names it and suggests close words, where torchtext
    silently returned a vector of zeros.
    """

    def __init__(
        self,
        name: str = "6B",
        dim: int | None = None,
        path: str | Path | None = None,
        cache: str | Path | None = None,
        max_vectors: int | None = None,
    ) -> None:
        name, dim = _check_name_and_dim(name, dim)
        max_vectors = validate.integer(max_vectors, "max_vectors", minimum=1, none_ok=True)
        if path is None and cache is None:
            if (name, dim) != ("6B", 50):
                raise ValueError(_not_shipped(name, dim))
            words, vectors = _load_subset(data_dir())
            words, vectors = words[:max_vectors], vectors[:max_vectors]
        else:
            source, member = _find_source(Path(path if path is not None else cache), name, dim)
            folder = Path(cache) if cache is not None else source.parent
            words, vectors = _load_text_cached(source, member, dim, folder, max_vectors)
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
        """The ``k`` words whose vectors have the highest cosine similarity to ``query`` (a word or a ``(dim,)``
        vector).

        A word query leaves itself out of the answer. Returns ``[(word, cosine), …]``, best first, each cosine to four
        decimals. Float32 cosines of every word make a shortlist; the shortlist's are computed again in float64, so
        that the ranking and the decimals are the same on every CPU.
        """
        skip = set(exclude)
        if isinstance(query, str):
            skip.add(query)
            query = self[query]
        if not isinstance(query, torch.Tensor):
            raise TypeError(f"query must be a word or a vector of shape ({self.dim},), got {type(query).__name__}.")
        if query.shape != (self.dim,):
            raise ValueError(f"query must be a word or a vector of shape ({self.dim},).")
        normalize = torch.nn.functional.normalize
        if self._unit is None:
            self._unit = normalize(self.vectors, dim=1)
        rough = self._unit @ normalize(query.float(), dim=0)  # (n,): float32 cosines, off by about 1e-7
        bar = torch.topk(rough, k + len(skip)).values[-1] - _SLACK
        shortlist = torch.nonzero(rough >= bar).flatten()  # (m,): every word that can be among the best
        exact = normalize(self.vectors[shortlist].double(), dim=1) @ normalize(query.double(), dim=0)  # (m,)
        ranked = torch.sort(exact, descending=True, stable=True)
        best = [(self.itos[i], c) for i, c in zip(shortlist[ranked.indices].tolist(), ranked.values.tolist(),
                                                  strict=True) if self.itos[i] not in skip][:k]
        return [(word, round(cosine, 4)) for word, cosine in best]


def tokenize(sentence: str) -> list[str]:
    """Lower-case ``sentence`` and split it into words and punctuation marks, as GloVe 6B was (chapter 3)."""
    if not isinstance(sentence, str):
        raise TypeError(f"tokenize takes a string, got {type(sentence).__name__}.")
    return re.findall(r"[\w]+(?:'[\w]+)?|[^\w\s]", sentence.lower())


def cosine_similarity(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine similarity between the rows of ``a`` ``(n, d)`` and of ``b`` ``(m, d)`` (default ``a``): ``(n, m)``
    (chapter 3).

    One-dimensional inputs are treated as single rows.
    """
    b = a if b is None else b
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or not torch.is_floating_point(t):
            raise TypeError(f"{name} must be a floating-point tensor.")
    a2, b2 = a.reshape(1, -1) if a.dim() == 1 else a, b.reshape(1, -1) if b.dim() == 1 else b
    if a2.dim() != 2 or b2.dim() != 2 or a2.shape[1] != b2.shape[1]:
        raise ValueError(f"cosine_similarity needs (n, d) and (m, d) with the same d; got {tuple(a.shape)}, "
                         f"{tuple(b.shape)}.")
    if (a2.norm(dim=1) == 0).any() or (b2.norm(dim=1) == 0).any():
        raise ValueError("A zero vector has no direction, so its cosine similarity is undefined.")
    f = torch.nn.functional.normalize
    return f(a2, dim=1) @ f(b2, dim=1).T
