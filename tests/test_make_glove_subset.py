"""scripts/make_glove_subset.py, which the GloVe loader's "damaged file" error tells a reader to run (chapter 3)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

import attn_helpers as ah

ROOT = Path(__file__).resolve().parent.parent


def test_rebuilding_from_glove_text_gives_the_shipped_files_bit_for_bit(tmp_path):
    """The shipped subset written back as GloVe text (float32 values printed exactly), zipped as glove.6B.zip:
    keeping every row, the script writes vectors and vocabulary whose SHA-256 are the shipped ones."""
    glove = ah.GloVe()
    text = tmp_path / "glove.6B.50d.txt"
    with open(text, "w", encoding="utf-8") as f:
        for word, row in zip(glove.itos, glove.vectors.numpy(), strict=True):
            f.write(word + " " + " ".join(np.format_float_positional(x, unique=True) for x in row) + "\n")
    with zipfile.ZipFile(tmp_path / "glove.6B.zip", "w") as archive:
        archive.write(text, "glove.6B.50d.txt")
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(ROOT / "data" / "chapter_words.txt", out)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_glove_subset.py"), "--source",
                           str(tmp_path / "glove.6B.zip"), "--top", str(len(glove)), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    glove_sums = [line for line in (ROOT / "data" / "SHA256SUMS").read_text().splitlines(keepends=True)
                  if "glove" in line]  # the folder also holds chapter 13's text, whose line the script keeps
    assert (out / "SHA256SUMS").read_text() == "".join(glove_sums)
