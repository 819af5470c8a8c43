"""The docs' generated blocks: the tables they show are the committed report files, verbatim; the site builds
strictly (no broken link, no page left out of it)."""

import pytest

from stsreg.cli import main
from stsreg.infra.errors import InputError
from stsreg.infra.doc_blocks import blocks, sync
from tests.conftest import REPO

#: Reports the docs show whole; each must sit in a generated block, so a rerun that changes it fails this test
#: until `make readme` copies it in.
EMBEDDED = {"reports/compare/results.md", "reports/claims.md", "reports/nli_table/results.md",
            "reports/baselines/results.md", "reports/same_settings/results.md", "reports/search/results.md"}


def test_docs_tables_are_the_committed_reports():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    shown = {str((page.parent / path).resolve().relative_to(REPO)) for page in pages
             for path, _, _ in blocks(page.read_text(encoding="utf-8"), page.name)}
    assert shown >= EMBEDDED
    for page in pages:
        assert sync(page, check=True) == [], f"run `make readme` after a stage rewrote a report shown in {page.name}"


def test_the_docs_site_builds_strictly(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    run = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "--site-dir",
                          str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site/comparison/index.html").is_file()


def _doc(tmp_path, body):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "t.md").write_text("| a |\n|---|\n| 2 |\n", encoding="utf-8")
    doc = tmp_path / "README.md"
    doc.write_text(body, encoding="utf-8")
    return doc


def test_sync_rewrites_only_the_stale_block_and_check_writes_nothing(tmp_path, capsys):
    body = "intro\n<!-- generated: r/t.md -->\n| a |\n|---|\n| 1 |\n<!-- end generated -->\nafter\n"
    doc = _doc(tmp_path, body)
    assert main(["report", "--readme", str(doc), "--check"]) == 3
    assert doc.read_text(encoding="utf-8") == body
    assert "block r/t.md out of date" in capsys.readouterr().out
    assert main(["report", "--readme", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == body.replace("| 1 |", "| 2 |")
    assert sync(doc, check=True) == []


@pytest.mark.parametrize("body, message", [
    ("x\n<!-- generated: r/t.md -->\n| a |\n", "README.md:2: generated block for r/t.md has no line"),
    ("<!-- generated: r/t.md -->\n<!-- generated: r/t.md -->\n<!-- end generated -->\n",
     "README.md:2: a generated block begins inside the one opened at line 1"),
    ("<!-- generated: r/gone.md -->\n<!-- end generated -->\n", "names r/gone.md, which does not exist"),
])
def test_malformed_blocks_are_refused_with_file_and_line(tmp_path, body, message):
    doc = _doc(tmp_path, body)
    with pytest.raises(InputError, match=message):
        sync(doc)
    assert doc.read_text(encoding="utf-8") == body
