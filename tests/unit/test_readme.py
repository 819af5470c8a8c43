"""The README's generated blocks: the tables it shows are the committed report files, verbatim."""

import pytest

from stsreg.cli import main
from stsreg.errors import InputError
from stsreg.readme import blocks, sync
from tests.conftest import REPO

#: Reports the README shows whole; each must sit in a generated block, so a rerun that changes it fails this test
#: until `stsreg report --readme README.md` copies it in.
EMBEDDED = {"reports/compare/results.md", "reports/claims.md", "reports/nli_table/results.md",
            "reports/baselines/results.md", "reports/same_settings/results.md", "reports/search/results.md"}


def test_readme_tables_are_the_committed_reports():
    readme = REPO / "README.md"
    assert {path for path, _, _ in blocks(readme.read_text(encoding="utf-8"))} >= EMBEDDED
    assert sync(readme, check=True) == [], "run `stsreg report --readme README.md` after a stage rewrote a report"


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
