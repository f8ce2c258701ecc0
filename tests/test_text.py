"""attn_helpers.text: the shipped Tiny Shakespeare, checked, read as characters, cut into windows, and its baselines."""

import math
import shutil

import pytest
import torch
from conftest import ROOT

from attn_helpers import text


@pytest.fixture(scope="module")
def corpus():
    return text.load_shakespeare()


def test_the_text_is_read_whole_and_split_nine_to_one(corpus):
    raw = (ROOT / "data" / text.TEXT_FILE).read_text(encoding="ascii")
    assert len(raw) == 1_115_394 and corpus.vocab == 65 and corpus.chars == "".join(sorted(set(raw)))
    assert len(corpus.train) + len(corpus.val) == len(raw) and len(corpus.train) == int(len(raw) * 0.9)
    assert corpus.decode(corpus.train[:14]) == raw[:14] == "First Citizen:"
    assert corpus.decode(corpus.val) == raw[len(corpus.train):]


def test_encode_and_decode_are_inverse_and_name_unknown_characters(corpus):
    ids = corpus.encode("ROMEO:\nO, she doth teach the torches!")
    assert ids.dtype == torch.long and corpus.decode(ids) == "ROMEO:\nO, she doth teach the torches!"
    assert corpus.decode(ids[None]) == corpus.decode(ids)
    with pytest.raises(ValueError, match=r"\['é'\] are not in the text's vocabulary"):
        corpus.encode("café")


@pytest.fixture()
def copied_data(tmp_path, monkeypatch):
    for name in (text.TEXT_FILE, "SHA256SUMS"):
        shutil.copy(ROOT / "data" / name, tmp_path / name)
    monkeypatch.setenv("ATTN_HELPERS_DATA", str(tmp_path))
    return tmp_path


def test_an_altered_or_missing_text_is_refused_with_the_fix(copied_data):
    path = copied_data / text.TEXT_FILE
    path.write_text(path.read_text().replace("Citizen", "citizen", 1))
    with pytest.raises(text.TextDataError, match="missing or altered.*git checkout -- data/"):
        text.load_shakespeare()
    path.unlink()
    with pytest.raises(text.TextDataError, match="missing or altered"):
        text.load_shakespeare()


def test_a_batch_is_windows_and_their_next_characters(corpus):
    x, y = text.batch(corpus.train, 5, 16, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 16)
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y, strict=True):  # each window is a stretch of the text
        start = next(i for i in range(len(corpus.train)) if torch.equal(corpus.train[i:i + 16], row_x))
        assert torch.equal(corpus.train[start + 1:start + 17], row_y)
        break
    with pytest.raises(ValueError, match="context"):
        text.batch(corpus.train[:10], 2, 10, torch.Generator())


def test_the_baselines_are_counts_and_rank_as_expected():
    tiny = text.Corpus("ab", torch.tensor([0, 1, 0, 1, 0, 1, 0, 0]), torch.tensor([0, 1, 0]))
    counts = torch.tensor([5.0 + 1, 3.0 + 1])  # a: 5, b: 3, plus one each
    assert math.isclose(text.ngram_loss(tiny, 1), -(counts / counts.sum()).log()[[0, 1, 0]].mean().item(), rel_tol=1e-6)
    after_a = torch.tensor([1.0 + 1, 3.0 + 1])  # a→a once, a→b three times
    after_b = torch.tensor([3.0 + 1, 0.0 + 1])  # b→a three times
    expected = -(math.log(after_a[1] / after_a.sum()) + math.log(after_b[0] / after_b.sum())) / 2
    assert math.isclose(text.ngram_loss(tiny, 2), expected, rel_tol=1e-6)
    with pytest.raises(ValueError, match="unigram"):
        text.ngram_loss(tiny, 3)


def test_the_shakespeare_baselines(corpus):
    b = text.baselines(corpus)
    assert b["uniform"] == math.log(65) and b["uniform"] > b["unigram"] > b["bigram"] > 2


def test_word_share_counts_the_words_of_the_training_text():
    corpus = text.load_shakespeare()
    assert text.word_share(corpus, "the king is dead, long live the kin") == 1.0  # "kin" may be cut off: left out
    assert text.word_share(corpus, "the zzqx king xqzz ") == 0.5
    assert text.word_share(corpus, "ZZZZZZ") == 0.0 and text.word_share(corpus, "") == 0.0
    with pytest.raises(TypeError, match="corpus.decode"):
        text.word_share(corpus, corpus.val[:10])
