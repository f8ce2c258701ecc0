"""attn_helpers.download: fetch, verify and cache glove.6B.zip, against a local server only."""

import hashlib
import http.server
import threading
import zipfile
from functools import partial

import pytest

import attn_helpers as ah
from attn_helpers.glove import GloVeDataError


class CountingHandler(http.server.SimpleHTTPRequestHandler):
    requests = 0

    def do_GET(self):
        type(self).requests += 1
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture()
def server(tmp_path):
    """Serve tmp_path/'site' on 127.0.0.1 at a free port; yields (base_url, site_dir, handler)."""
    site = tmp_path / "site"
    site.mkdir()
    handler = type("Handler", (CountingHandler,), {"requests": 0})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", site, handler
    httpd.shutdown()


def make_zip(site):
    path = site / "glove.6B.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("glove.6B.50d.txt", "".join(f"w{i} " + " ".join(["0.5"] * 50) + "\n" for i in range(300)))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_verifies_caches_and_loads(server, tmp_path, capsys):
    base, site, handler = server
    _, digest = make_zip(site)
    cache = tmp_path / "cache"
    path = ah.download.download_glove(f"{base}/glove.6B.zip", sha256=digest, cache_dir=cache)
    assert path == cache / "glove.6B.zip" and path.read_bytes() == (site / "glove.6B.zip").read_bytes()
    assert "glove.6B.zip" in capsys.readouterr().err  # the progress bar
    assert (cache / "glove.6B.zip.sha256").read_text().strip() == digest
    assert handler.requests == 1
    again = ah.download.download_glove(f"{base}/glove.6B.zip", cache_dir=cache)  # from the cache, verified
    assert again == path and handler.requests == 1
    assert len(ah.GloVe(path=path)) == 300


def test_wrong_checksum_is_rejected_and_nothing_is_kept(server, tmp_path):
    base, site, _ = server
    make_zip(site)
    cache = tmp_path / "cache"
    with pytest.raises(GloVeDataError, match="expected 0000"):
        ah.download.download_glove(f"{base}/glove.6B.zip", sha256="0" * 64, cache_dir=cache, progress=False)
    assert list(cache.iterdir()) == []


def test_changed_cache_file_is_noticed(server, tmp_path):
    base, site, _ = server
    make_zip(site)
    cache = tmp_path / "cache"
    path = ah.download.download_glove(f"{base}/glove.6B.zip", cache_dir=cache, progress=False)
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(GloVeDataError, match="SHA-256"):
        ah.download.download_glove(f"{base}/glove.6B.zip", cache_dir=cache, progress=False)


def test_a_non_zip_is_rejected(server, tmp_path):
    base, site, _ = server
    (site / "glove.6B.zip").write_text("<html>not found</html>")
    with pytest.raises(GloVeDataError, match="not a zip archive"):
        ah.download.download_glove(f"{base}/glove.6B.zip", cache_dir=tmp_path / "c", progress=False)


def test_unreachable_server_explains_the_offline_default(server, tmp_path):
    base, _, _ = server
    with pytest.raises(ConnectionError, match="50-dimensional vectors ship in data/"):
        ah.download.download_glove(f"{base}/missing.zip", cache_dir=tmp_path / "c", progress=False)
    assert not (tmp_path / "c" / "missing.zip.part").exists()
