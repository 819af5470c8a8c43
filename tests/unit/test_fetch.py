"""fetch: mirror copy, sha256 verification, upstream download (a real HTTP server on loopback), errors."""

import functools
import hashlib
import http.server
import io
import json
import threading
import zipfile
from pathlib import Path

import pytest

from stsreg.cli import main
from stsreg.product.data.sources import FetchError, Source, fetch_all, load_registry


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def mirror(tmp_path):
    m = tmp_path / "mirror"
    (m / "A").mkdir(parents=True)
    (m / "A/one.txt").write_bytes(b"one\n")
    (m / "A/two.txt").write_bytes(b"two\n")
    return m


@pytest.fixture
def http_root(tmp_path):
    """A static HTTP server on a free loopback port, serving ``root``; yields (root, base_url)."""
    root = tmp_path / "upstream"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_copies_and_verifies(mirror, tmp_path):
    sources = [Source("A", "A/one.txt", sha(b"one\n")), Source("A", "A/two.txt", sha(b"two\n"))]
    summary = fetch_all(sources, mirror, tmp_path / "raw", allow_download=False)
    assert summary == {"files": 2, "bytes": 8}
    assert (tmp_path / "raw/A/one.txt").read_bytes() == b"one\n"


def test_corrupted_and_missing_files_are_listed_in_one_error(mirror, tmp_path):
    sources = [Source("A", "A/one.txt", sha(b"ONE\n"), url=""),          # mirror copy differs
               Source("A", "A/two.txt", sha(b"two\n")),                  # fine
               Source("B", "B/three.txt", sha(b"three\n"), url="")]       # missing
    with pytest.raises(FetchError) as err:
        fetch_all(sources, mirror, tmp_path / "raw", allow_download=True)
    msg = str(err.value)
    assert msg.startswith("2 of 3 raw file(s) could not be supplied:")
    want, got = sha(b"ONE\n"), sha(b"one\n")
    assert f"A/one.txt [A] expected sha256 {want}: mirror copy {mirror}/A/one.txt has sha256 {got}" in msg
    assert "B/three.txt [B]" in msg and "not in mirror" in msg and "no upstream URL registered" in msg
    assert "How to fix:" in msg and "--mirror DIR" in msg and "STSREG_DATA_MIRROR" in msg
    assert not (tmp_path / "raw/A/one.txt").exists()  # a corrupted copy never lands in data/raw


def test_corrupted_file_already_in_raw_is_replaced(mirror, tmp_path):
    raw = tmp_path / "raw"
    (raw / "A").mkdir(parents=True)
    (raw / "A/one.txt").write_bytes(b"tampered")
    fetch_all([Source("A", "A/one.txt", sha(b"one\n"))], mirror, raw, allow_download=False)
    assert (raw / "A/one.txt").read_bytes() == b"one\n"


def test_downloads_from_upstream_when_mirror_lacks_file(http_root, tmp_path):
    root, base = http_root
    (root / "plain.txt").write_bytes(b"plain\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("inner/member.tsv", b"a\tb\n")
    (root / "bundle.zip").write_bytes(buf.getvalue())
    sources = [Source("P", "P/plain.txt", sha(b"plain\n"), url=f"{base}/plain.txt"),
               Source("Z", "Z/member.tsv", sha(b"a\tb\n"), url=f"{base}/bundle.zip", archive_member="inner/member.tsv")]
    fetch_all(sources, tmp_path / "empty-mirror", tmp_path / "raw", allow_download=True)
    assert (tmp_path / "raw/Z/member.tsv").read_bytes() == b"a\tb\n"
    # wrong bytes upstream are refused too
    bad = [Source("P", "P/other.txt", sha(b"expected\n"), url=f"{base}/plain.txt")]
    with pytest.raises(FetchError, match="download from .*plain.txt has sha256"):
        fetch_all(bad, tmp_path / "empty-mirror", tmp_path / "raw2", allow_download=True)
    with pytest.raises(FetchError, match="failed: HTTPError"):
        fetch_all([Source("P", "P/x.txt", sha(b"x"), url=f"{base}/missing.txt")], tmp_path / "m", tmp_path / "r3")


def test_cli_mirror_flag_env_and_exit_code(mirror, tmp_path, monkeypatch, capsys, own_project):
    registry = tmp_path / "sources.json"
    registry.write_text(json.dumps([{"dataset": "A", "file": "A/one.txt", "sha256": sha(b"one\n"), "url": ""}]))
    params = tmp_path / "params.yaml"
    params.write_text("fetch:\n  mirror: does-not-exist\n  allow_download: false\n")
    args = ["fetch", "--params", str(params), "--registry", str(registry), "--out", str(tmp_path / "raw")]
    assert main(args) == 2
    assert "not in mirror" in capsys.readouterr().err
    monkeypatch.setenv("STSREG_DATA_MIRROR", str(mirror))
    assert main(args) == 0
    monkeypatch.delenv("STSREG_DATA_MIRROR")
    assert main(args + ["--mirror", str(mirror), "--out", str(tmp_path / "raw2")]) == 0
    assert (tmp_path / "raw2/A/one.txt").exists()


def test_registry_covers_every_shared_file():
    """The committed registry lists every file of the data SOURCES.json with the same sha256."""
    repo = Path(__file__).resolve().parents[2]
    registry = {s.file: s for s in load_registry(repo / "data/sources.json")}
    shared = repo.parent / "shared/data/SOURCES.json"
    if not shared.exists():
        pytest.skip("../shared/data not present")
    upstream = json.loads(shared.read_text())
    assert {e["file"]: e["sha256"] for e in upstream} == {f: s.sha256 for f, s in registry.items()}
    assert all(s.url.startswith("https://") for s in registry.values())
