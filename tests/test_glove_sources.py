"""GloVe beyond the shipped subset: torchtext's names and arguments, folders, and the parsed copy (issue 14)."""

import os
import zipfile

import numpy as np
import pytest
import torch
from messages import POSITIVE_INTEGER, raises_saying

import attn_helpers as ah
from attn_helpers import glove as glove_module


def write_glove(path, n=6, dim=4, offset=0.0):
    """A small GloVe text file: word i has the vector (i + offset) + j/10, j = 0 … dim-1."""
    path.write_text("".join(
        f"w{i} " + " ".join(f"{i + offset + j / 10:g}" for j in range(dim)) + "\n" for i in range(n)
    ), encoding="utf-8")
    return path


def cached_copies(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".npy", ".vocab.txt")))


@pytest.mark.parametrize("name, dim", [("6B", 100), ("42B", 300), ("840B", 300), ("twitter.27B", 25)])
def test_torchtext_names_read_their_files(tmp_path, name, dim):
    write_glove(tmp_path / f"glove.{name}.{dim}d.txt", dim=dim)
    g = ah.GloVe(name=name, dim=dim, path=tmp_path / f"glove.{name}.{dim}d.txt")
    assert (g.name, g.dim, len(g)) == (name, dim, 6)
    assert float(g["w2"][1]) == pytest.approx(2.1)


def test_default_dims_follow_torchtext(tmp_path):
    write_glove(tmp_path / "glove.42B.300d.txt", dim=300)
    assert ah.GloVe(name="42B", cache=tmp_path).dim == 300  # 42B and 840B come only in 300d
    with pytest.raises(ValueError, match=r"twitter.27B comes in dimensions \(25, 50, 100, 200\): pass one"):
        ah.GloVe(name="twitter.27B", cache=tmp_path)


@pytest.mark.parametrize("kwargs", [{"dim": "50"}, {"dim": True}])
def test_a_dim_of_the_wrong_kind_is_a_type_error(kwargs):
    with raises_saying(TypeError, "dim " + POSITIVE_INTEGER, f"{kwargs['dim']!r} (a "):
        ah.GloVe(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"dim": 0}, "dim " + POSITIVE_INTEGER + ", got 0"),
    ({"name": "42B", "dim": 100}, r"GloVe 42B comes in dimensions \(300,\), got dim=100"),
    ({"name": "twitter.27B", "dim": 300}, r"dimensions \(25, 50, 100, 200\)"),
    ({"name": "6b"}, r"Only GloVe '6B', '42B', '840B', 'twitter.27B' exist.*got name='6b'"),
    ({"max_vectors": 0}, "max_vectors " + POSITIVE_INTEGER),
    ({"name": "42B"}, r"glove\.42B\.300d\.zip \(about 1\.75 GB\).*nlp\.stanford\.edu/projects/glove"),
    ({"name": "twitter.27B", "dim": 50}, r"glove\.twitter\.27B\.zip \(about 1\.42 GB\)"),
])
def test_names_and_dims_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ah.GloVe(**kwargs)


def test_missing_file_in_cache_says_where_it_comes_from(tmp_path):
    with pytest.raises(FileNotFoundError,
                       match=r"No glove\.840B\.300d\.txt.*glove\.840B\.300d\.zip \(about 2\.03 GB\)"):
        ah.GloVe(name="840B", cache=tmp_path)


def test_a_folder_finds_the_file_for_the_dim_or_lists_what_is_there(tmp_path):
    folder = tmp_path / "glove.6B"  # a reader passes the unzipped folder
    folder.mkdir()
    write_glove(folder / "glove.6B.50d.txt", dim=50)
    write_glove(folder / "glove.6B.100d.txt", dim=100)
    assert ah.GloVe(dim=100, path=folder).dim == 100
    assert ah.GloVe(path=folder).vectors.shape == (6, 50)
    with pytest.raises(FileNotFoundError,
                       match=r"No glove\.6B\.300d\.txt.*holds glove\.6B\.100d\.txt, glove\.6B\.50d\.txt"):
        ah.GloVe(dim=300, path=folder)


def test_a_folder_with_the_zip(tmp_path):
    text = write_glove(tmp_path / "glove.6B.200d.txt", dim=200)
    folder = tmp_path / "downloads"
    folder.mkdir()
    with zipfile.ZipFile(folder / "glove.6B.zip", "w") as z:
        z.write(text, "glove.6B.200d.txt")
    g = ah.GloVe(dim=200, cache=folder)
    assert torch.equal(g.vectors, ah.GloVe(dim=200, path=text).vectors)
    assert any(name.startswith("glove.6B.zip-glove.6B.200d.txt.") for name in cached_copies(folder))


def test_second_load_uses_the_parsed_copy(tmp_path, monkeypatch):
    text = write_glove(tmp_path / "glove.6B.50d.txt", dim=50)
    first = ah.GloVe(path=text)
    assert len(cached_copies(tmp_path)) == 2  # the .npy and its vocabulary

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed the text again instead of using the cached copy")

    monkeypatch.setattr(glove_module._files, "_read_glove_text", no_parsing)  # the reader of the files
    second = ah.GloVe(path=text)
    assert second.itos == first.itos and torch.equal(second.vectors, first.vectors)
    assert isinstance(second.vectors, torch.Tensor) and second.vectors.dtype == torch.float32
    assert second.stoi["w3"] == 3
    second.vectors[0, 0] = 99.0  # copy-on-write: the cached file is not changed
    assert ah.GloVe(path=text).vectors[0, 0] == first.vectors[0, 0]


def test_a_changed_source_is_parsed_again_and_the_old_copy_removed(tmp_path):
    text = write_glove(tmp_path / "glove.6B.50d.txt", dim=50)
    ah.GloVe(path=text)
    old = cached_copies(tmp_path)
    write_glove(text, n=7, dim=50, offset=100.0)
    stat = text.stat()
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a clearly later modification time
    g = ah.GloVe(path=text)
    assert len(g) == 7 and float(g["w0"][0]) == pytest.approx(100.0)
    new = cached_copies(tmp_path)
    assert len(new) == 2 and not set(old) & set(new)


def test_cache_folder_holds_the_copy(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    text = write_glove(source / "glove.6B.50d.txt", dim=50)
    cache = tmp_path / ".vector_cache"
    ah.GloVe(path=text, cache=cache)
    assert cached_copies(source) == [] and len(cached_copies(cache)) == 2


def test_copies_are_written_atomically(tmp_path, monkeypatch):
    text = write_glove(tmp_path / "glove.6B.50d.txt", dim=50)

    def broken_save(f, array):
        f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(glove_module._files.np, "save", broken_save)
    g = ah.GloVe(path=text)  # the load itself succeeds; the copy is not kept
    assert len(g) == 6
    assert not any(p.name.endswith(".npy") for p in tmp_path.iterdir())
    assert not any(p.name.endswith(".part") for p in tmp_path.iterdir())  # no half-written file left
    monkeypatch.undo()
    ah.GloVe(path=text)
    assert len(cached_copies(tmp_path)) == 2


def test_max_vectors_keeps_the_first_words(tmp_path):
    text = write_glove(tmp_path / "glove.6B.50d.txt", n=10, dim=50)
    g = ah.GloVe(path=text, max_vectors=4)
    assert g.itos == ["w0", "w1", "w2", "w3"] and g.vectors.shape == (4, 50) and "w5" not in g
    assert cached_copies(tmp_path) == []  # only part of the file was read: no copy
    ah.GloVe(path=text)
    g = ah.GloVe(path=text, max_vectors=3)  # now from the copy
    assert g.itos == ["w0", "w1", "w2"] and g.vectors.shape == (3, 50)
    assert len(ah.GloVe(max_vectors=100)) == 100  # the shipped subset too


def test_cached_copy_keeps_the_dim_check(tmp_path):
    text = write_glove(tmp_path / "glove.6B.50d.txt", dim=100)  # misnamed: 100 numbers a line
    with pytest.raises(ah.glove.GloVeDataError, match="holds 100-dimensional vectors, not 50"):
        ah.GloVe(path=text)


def test_words_with_spaces_as_in_glove_840b(tmp_path):
    text = tmp_path / "glove.840B.300d.txt"
    write_glove(text, n=3, dim=300)
    with open(text, "a", encoding="utf-8") as f:
        f.write(". . . " + " ".join(["0.5"] * 300) + "\n")
    g = ah.GloVe(name="840B", path=text)
    assert g.itos[-1] == ". . ." and float(g[". . ."][299]) == 0.5 and len(g) == 4
    assert np.array_equal(g.vectors[1].numpy(), np.array([1 + j / 10 for j in range(300)], dtype=np.float32))
