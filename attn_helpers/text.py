"""A real text for a small language model: Tiny Shakespeare, read character by character (chapter 13).

The book ships the text in ``data/`` with its SHA-256 (see ``data/PROVENANCE.md``); :func:`load_shakespeare` checks
it, maps each of its characters to an integer and splits the ids as nanoGPT does: the first 90% for training, the
last 10% for validation. :func:`batch` cuts random windows for training; :func:`ngram_loss` gives the two baselines a
model must beat, the unigram (character counts) and the bigram (counts of each character after each character).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from . import validate
from .glove import CHECKSUMS, data_dir, sha256_of

__all__ = ["TEXT_FILE", "TextDataError", "Corpus", "load_shakespeare", "batch", "ngram_loss", "baselines", "word_share"]

TEXT_FILE = "tinyshakespeare.txt"  #: the shipped text, in ``data/`` (chapter 13)


class TextDataError(RuntimeError):
    """The shipped text is missing or altered (chapter 13)."""


@dataclass(frozen=True)
class Corpus:
    """A text as character ids (chapter 13): ``chars`` (the sorted vocabulary), ``train`` and ``val`` (1-D int64)."""

    chars: str
    train: torch.Tensor
    val: torch.Tensor

    @property
    def vocab(self) -> int:
        """The number of distinct characters."""
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """The ids ``(len(text),)`` of a string's characters; a character the text never uses raises."""
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"characters {unknown} are not in the text's vocabulary of {self.vocab}; use only these: "
                             f"{self.chars!r}.")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """The string of character ids ``(t,)`` or ``(1, t)``."""
        ids = ids.reshape(1, -1) if isinstance(ids, torch.Tensor) else ids
        validate.token_ids(ids, self.vocab)
        return "".join(self.chars[i] for i in ids[0].tolist())


def load_shakespeare(val_share: float = 0.1) -> Corpus:
    """Tiny Shakespeare, checked against its SHA-256, as a :class:`Corpus` whose last ``val_share`` is validation
    (chapter 13)."""
    val_share = validate.real(val_share, "val_share", above=0, at_most=0.5,
                              why="the share of the text kept for validation")
    path = data_dir() / TEXT_FILE
    expected = {line.split()[-1]: line.split()[0] for line in (data_dir() / CHECKSUMS).read_text().splitlines()}
    if not path.is_file() or sha256_of(path) != expected.get(TEXT_FILE):
        raise TextDataError(f"{path} is missing or altered (its SHA-256 is not the one in {CHECKSUMS}). Restore it "
                             f"with `git checkout -- data/`; data/PROVENANCE.md says where it comes from.")
    text = path.read_text(encoding="ascii")
    chars = "".join(sorted(set(text)))
    ids = torch.tensor(list(text.encode("ascii")), dtype=torch.long)  # (n,) bytes
    ids = torch.searchsorted(torch.tensor(list(chars.encode("ascii"))), ids)  # (n,) each byte's place in chars
    cut = int(len(ids) * (1 - val_share))
    return Corpus(chars, ids[:cut], ids[cut:])


def batch(ids: torch.Tensor, batch_size: int, context: int, generator: torch.Generator) -> tuple[torch.Tensor,
                                                                                             torch.Tensor]:
    """``batch_size`` random windows of ``context`` ids and the ids one place later (chapter 13).

    Returns ``(x (b, t), y (b, t))``: ``y[:, i]`` is the character after ``x[:, i]``, the one to predict there.
    """
    batch_size = validate.integer(batch_size, "batch_size", minimum=1)
    context = validate.integer(context, "context", minimum=1, maximum=len(ids) - 1,
                               why="a window and the character after it must fit in the text")
    starts = torch.randint(len(ids) - context, (batch_size,), generator=generator)  # (b,)
    rows = starts[:, None] + torch.arange(context + 1)  # (b, t + 1)
    window = ids[rows]  # (b, t + 1)
    return window[:, :-1], window[:, 1:]


def ngram_loss(corpus: Corpus, n: int) -> float:
    """Validation loss (nats per character) of the unigram (``n=1``) or bigram (``n=2``) model of the training text
    (chapter 13).

    Counts come from ``corpus.train``, each plus one (add-one smoothing, so no character has probability 0); the loss
    is the mean of ``-log p`` over the validation characters (for the bigram, given the character before).
    """
    n = validate.integer(n, "n", minimum=1, maximum=2, why="the baselines are unigram (1) and bigram (2)")
    V, train, val = corpus.vocab, corpus.train, corpus.val
    if n == 1:
        counts = torch.bincount(train, minlength=V).double() + 1  # (V,)
        return float(-(counts / counts.sum()).log()[val].mean())
    pairs = torch.bincount(train[:-1] * V + train[1:], minlength=V * V).double().view(V, V) + 1  # (V, V): [prev, next]
    log_p = (pairs / pairs.sum(dim=1, keepdim=True)).log()  # (V, V): each row a distribution over the next character
    return float(-log_p[val[:-1], val[1:]].mean())


def baselines(corpus: Corpus) -> dict[str, float]:
    """The validation losses a language model must beat (chapter 13): ``uniform`` (log of the vocabulary),
    ``unigram`` and ``bigram`` (:func:`ngram_loss`), in nats per character."""
    return {"uniform": math.log(corpus.vocab), "unigram": ngram_loss(corpus, 1), "bigram": ngram_loss(corpus, 2)}


def word_share(corpus: Corpus, written: str) -> float:
    """The share of the words of ``written`` that are words of the training text (chapter 13).

    A word is a run of letters and apostrophes ended by another character: a word at the very end is left out, since
    generation may stop inside it. A string with no whole word gives 0.
    """
    if not isinstance(written, str):
        raise TypeError(f"written must be a string, got {type(written).__name__}; decode ids with corpus.decode(ids).")
    words = re.findall(r"[A-Za-z']+(?=[^A-Za-z'])", written)
    known = set(re.findall(r"[A-Za-z']+", corpus.decode(corpus.train)))
    return sum(w in known for w in words) / len(words) if words else 0.0
