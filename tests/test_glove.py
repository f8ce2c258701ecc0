"""attn_helpers.glove: the shipped subset, torchtext's interface, the text loader and its error messages."""

import hashlib
import shutil
import zipfile

import numpy as np
import pytest
import torch
from conftest import ROOT

import attn_helpers as ah
from attn_helpers import glove as glove_module

# GloVe 6B 50d's vector for "ship", as printed in seed 004 (Nugues 2024, chapter 15), first 8 values
SHIP_PREFIX = [1.5213, 0.1052, 0.3816, -0.5080, 0.0324, -0.1348, -1.2474, 0.7981]


def test_subset_has_torchtext_interface(glove):
    assert glove.dim == 50 and len(glove) >= 50_000
    assert glove.vectors.shape == (len(glove), 50) and glove.vectors.dtype == torch.float32
    assert glove.itos[:4] == ["the", ",", ".", "of"]  # GloVe's own (frequency) order
    assert all(glove.stoi[w] == i for i, w in enumerate(glove.itos[:1000]))
    assert "cat" in glove and "zzzqqq" not in glove
    assert glove["cat"].shape == (50,)
    assert torch.equal(glove.get_vecs_by_tokens("cat"), glove["cat"])
    assert glove.get_vecs_by_tokens(["the", "cat"]).shape == (2, 50)
    assert torch.equal(glove.get_vecs_by_tokens(["Cat"], lower_case_backup=True)[0], glove["cat"])


def test_values_are_the_official_ones(glove):
    assert torch.allclose(glove["ship"][:8], torch.tensor(SHIP_PREFIX), atol=5e-5)
    the = [0.418, 0.24968, -0.41242, 0.1217, 0.34527]  # first line of glove.6B.50d.txt
    assert torch.equal(glove["the"][:5], torch.tensor(the, dtype=torch.float32))


def test_every_listed_chapter_word_is_shipped(glove):
    lines = (ROOT / "data" / "chapter_words.txt").read_text().splitlines()
    words = [w for line in lines if not line.startswith("#") for w in line.split()]
    assert words and all(w in glove for w in words)


def test_odyssey_attention_matches_the_published_numbers(glove):
    X = glove.embed("I must go back to my ship and to my crew")
    _, w = ah.attention(X, X, X)
    assert round(float(w[6, 6]), 2) == 0.55 and round(float(w[6, 10]), 2) == 0.13
    X = glove.embed("We process and ship your order")
    _, w = ah.attention(X, X, X)
    assert round(float(w[3, 3]), 2) == 0.78


def test_unknown_words_are_named_with_suggestions(glove):
    with pytest.raises(ah.glove.OutOfVocabularyError,
                       match="'shipz' is not in the GloVe vocabulary.*Close words: .*ship"):
        glove["shipz"]
    with pytest.raises(KeyError, match="lower-case: try 'ship'"):
        glove["Ship"]
    with pytest.raises(ah.glove.OutOfVocabularyError, match="'qwxzvbn'.*No close word"):
        glove.embed("the qwxzvbn cat")
    with pytest.raises(TypeError, match="by string"):
        glove[3]


def test_embed_tokenize_and_empty(glove):
    assert ah.tokenize("We process, and SHIP your order.") == [
        "we", "process", ",", "and", "ship", "your", "order", "."]
    assert glove.embed("the cat").shape == (2, 50)
    assert torch.equal(glove.embed(["the", "cat"]), glove.embed("The cat"))
    with pytest.raises(ValueError, match="sentence is empty"):
        glove.embed("   ")
    with pytest.raises(ValueError, match="empty list"):
        glove.get_vecs_by_tokens([])


def test_nearest_and_cosine(glove):
    words = [w for w, _ in glove.nearest("ship", k=3)]
    assert "ship" not in words and "vessel" in words
    assert glove.nearest(glove["ship"], k=1)[0][0] == "ship"
    sims = ah.cosine_similarity(glove.embed("we process and ship your order"))
    assert sims.shape == (6, 6) and torch.allclose(sims.diagonal(), torch.ones(6))
    assert round(float(sims[0, 1]), 2) == 0.64  # "we" and "process", seed 004's table
    with pytest.raises(ValueError, match="zero vector"):
        ah.cosine_similarity(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="same d"):
        ah.cosine_similarity(torch.ones(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="query must be a word or a vector"):
        glove.nearest(torch.ones(3))


def test_nearest_ranks_every_word_by_its_float64_cosine(glove):
    """The float32 shortlist loses no word: the answer is the brute-force float64 ranking of the whole vocabulary."""
    unit = torch.nn.functional.normalize(glove.vectors.double(), dim=1)  # (n, d)
    queries = ((glove["ship"] + glove["crew"], 8, set()), (glove["river"], 5, set()), ("bank", 6, {"bank"}),
               ("report", 8, {"report"}))  # float32 rounds the cosine of "report" and "reports" to 0.9087
    for query, k, skip in queries:
        vector = glove[query] if isinstance(query, str) else query
        cosines = unit @ torch.nn.functional.normalize(vector.double(), dim=0)  # (n,)
        order = [i for i in torch.argsort(cosines, descending=True, stable=True)[:k + 1].tolist()
                 if glove.itos[i] not in skip][:k]
        assert glove.nearest(query, k=k) == [(glove.itos[i], round(float(cosines[i]), 4)) for i in order]


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="Only GloVe '6B', '42B', '840B', 'twitter.27B' exist"):
        ah.GloVe(name="1B")
    with pytest.raises(ValueError, match=r"Only GloVe 6B .* ships.*glove\.840B\.300d\.zip \(about 2\.03 GB\)"):
        ah.GloVe(name="840B")
    with pytest.raises(ValueError, match="dimensions \\(50, 100, 200, 300\\)"):
        ah.GloVe(dim=64)
    with pytest.raises(ValueError, match="download_glove"):
        ah.GloVe(dim=100)
    with pytest.raises(FileNotFoundError, match="No GloVe file"):
        ah.GloVe(path="/nonexistent/glove.6B.50d.txt")


@pytest.fixture()
def copied_data(tmp_path, monkeypatch):
    for name in ("glove.6B.50d.subset.npy", "glove.6B.50d.subset.vocab.txt", "SHA256SUMS"):
        shutil.copy(ROOT / "data" / name, tmp_path / name)
    monkeypatch.setenv("ATTN_HELPERS_DATA", str(tmp_path))
    return tmp_path


def test_corrupt_subset_is_reported(copied_data):
    vectors = copied_data / "glove.6B.50d.subset.npy"
    data = bytearray(vectors.read_bytes())
    data[-1] ^= 0xFF
    vectors.write_bytes(bytes(data))
    with pytest.raises(ah.glove.GloVeDataError, match="is corrupt: its SHA-256.*git checkout -- data/"):
        ah.GloVe()


def test_garbled_header_with_matching_checksums_is_reported_with_the_fix(copied_data):
    """A header rewritten to describe Python objects, checksums rewritten to match: NumPy would say "This
    file contains pickled (object) data" and suggest unpickling it; the loader says what is wrong instead."""
    vectors = copied_data / "glove.6B.50d.subset.npy"
    data = vectors.read_bytes()
    assert b"'<f4'" in data[:128]
    vectors.write_bytes(data.replace(b"'<f4'", b"'|O' ", 1))  # the same length: the header stays well formed
    sums = copied_data / "SHA256SUMS"
    digest = hashlib.sha256(vectors.read_bytes()).hexdigest()
    sums.write_text("".join(line if "subset.npy" not in line else f"{digest}  glove.6B.50d.subset.npy\n"
                            for line in sums.read_text().splitlines(keepends=True)))
    with pytest.raises(ah.glove.GloVeDataError, match=r"subset.npy is not a valid vector file \(its header describes "
                       r"Python objects, not numbers\).*git checkout -- data/") as raised:
        ah.GloVe()
    assert "pickle" not in str(raised.value)  # never the advice to unpickle an untrusted file


def test_a_damaged_cached_copy_is_parsed_again(tmp_path):
    source = tmp_path / "glove.6B.3d.txt"
    source.write_text("the 0.1 0.2 0.3\nof 1 2 3\n")
    first = ah.glove._files._load_text_cached(source, None, 3, tmp_path / "cache")
    [copy] = (tmp_path / "cache").glob("*.npy")
    copy.write_bytes(copy.read_bytes().replace(b"'<f4'", b"'|O' ", 1))
    words, vectors = ah.glove._files._load_text_cached(source, None, 3, tmp_path / "cache")
    assert words == first[0] == ["the", "of"] and np.array_equal(vectors, first[1])
    assert np.load(copy).dtype == np.float32  # and the copy was written again


def test_missing_subset_is_reported(copied_data):
    (copied_data / "glove.6B.50d.subset.vocab.txt").unlink()
    with pytest.raises(ah.glove.GloVeDataError, match="is missing"):
        ah.GloVe()
    (copied_data / "SHA256SUMS").unlink()
    with pytest.raises(ah.glove.GloVeDataError, match="SHA256SUMS is missing"):
        ah.GloVe()


SAMPLE = (
    'the 0.1 0.2 0.3\n'
    'null 1.0 -2.5 3e-2\n'
    'nan 4 5 6\n'
    '" -1 -2 -3\n'
    "n't 0.5 0.25 0.125\n"
    '# 7 8 9\n'
)


def test_text_loader_reads_tricky_tokens_exactly(tmp_path):
    path = tmp_path / "glove.6B.50d.txt"
    path.write_text(SAMPLE, encoding="utf-8")
    words, vectors = glove_module._files._read_glove_text(path)
    assert words == ["the", "null", "nan", '"', "n't", "#"]
    assert vectors.dtype == np.float32
    assert np.array_equal(vectors[1], np.array([1.0, -2.5, 0.03], dtype=np.float32))


def test_loading_by_path_and_from_zip(tmp_path):
    lines = "".join(f"w{i} " + " ".join(str(i + j / 10) for j in range(100)) + "\n" for i in range(20))
    text = tmp_path / "glove.6B.100d.txt"
    text.write_text(lines)
    g = ah.GloVe(dim=100, path=text)
    assert len(g) == 20 and g.dim == 100 and float(g["w3"][2]) == pytest.approx(3.2)
    archive = tmp_path / "glove.6B.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(text, "glove.6B.100d.txt")
    assert torch.equal(ah.GloVe(dim=100, path=archive).vectors, g.vectors)
    with pytest.raises(ah.glove.GloVeDataError, match="no member glove.6B.300d.txt"):
        ah.GloVe(dim=300, path=archive)
    with pytest.raises(ah.glove.GloVeDataError, match="holds 100-dimensional vectors, not 50"):
        ah.GloVe(dim=50, path=text)


def test_truncated_text_file_is_reported(tmp_path):
    path = tmp_path / "glove.6B.50d.txt"
    path.write_text("the 0.1 0.2 0.3\ncat 0.4 0.5\n")
    with pytest.raises(ah.glove.GloVeDataError, match="truncated|not a GloVe text file"):
        glove_module._files._read_glove_text(path)
