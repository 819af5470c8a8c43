"""The worked example of docs/own_data.md builds its table from the data mirror: a format, column names and scale
the public readers do not take, declared as the page declares it, and rows that arrive later."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA


@pytest.mark.skipif(not (SHARED_DATA / "STS15").is_dir(), reason="needs the data mirror (../shared/data)")
def test_the_example_table_is_built_from_the_mirror_and_reads_as_declared(tmp_path):
    from stsreg.infra.config import StsTableColumns, StsTableSource
    from stsreg.product.data import user_tables

    subprocess.run([sys.executable, str(REPO / "scripts/own_data_example.py"), "--mirror", str(SHARED_DATA)],
                   cwd=tmp_path, check=True, capture_output=True)
    table = [json.loads(x) for x in (tmp_path / "data/tables/qa_pairs.jsonl").read_text().splitlines()]
    new = [json.loads(x) for x in (tmp_path / "qa_new_rows.jsonl").read_text().splitlines()]
    assert (len(table), len(new)) == (1270, 318)  # the 1,588 scored Q&A pairs of STS15/STS16, 80% / 20%
    assert set(table[0]) == {"text_a", "text_b", "similarity"}
    assert all(0.0 <= r["similarity"] <= 1.0 for r in table + new)
    assert not {(r["text_a"], r["text_b"]) for r in table} & {(r["text_a"], r["text_b"]) for r in new}
    # declared as the page declares it: read, split by the pair's hash, scores mapped from 0-1 to 0-5
    qa = StsTableSource(name="qa", file="data/tables/qa_pairs.jsonl", scale=(0.0, 1.0), d=0.2, dev_fraction=0.15,
                        test_fraction=0.25,
                        columns=StsTableColumns(sentence1="text_a", sentence2="text_b", score="similarity"))
    kept, rejects, counts = user_tables.read_table(qa, tmp_path)
    assert counts["kept"] == 1270 and len(rejects) == 0 and kept.score.max() <= 5.0
    assert (counts["rows_train"], counts["rows_dev"], counts["rows_test"]) == (768, 197, 305)


@pytest.mark.skipif(not (SHARED_DATA / "STS15").is_dir(), reason="needs the data mirror (../shared/data)")
def test_the_example_commands_as_the_page_prints_them(tmp_path):
    """docs/own_data.md's build and check commands, typed in a folder of their own (the check writes nothing)."""
    import shlex

    from tests.helpers.doc_commands import EXAMPLE_BUILD, EXAMPLE_CHECK, page_commands

    assert {EXAMPLE_BUILD, EXAMPLE_CHECK} <= set(page_commands(REPO)["docs/own_data.md"])
    build = shlex.split(EXAMPLE_BUILD)
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())  # the project's, as in a clone
    subprocess.run([sys.executable, str(REPO / build[1]), "--mirror", str(SHARED_DATA)], cwd=tmp_path, check=True)
    stsreg = [str(Path(sys.executable).with_name("stsreg"))]  # the venv's console script, as the page types it
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = subprocess.run(stsreg + shlex.split(EXAMPLE_CHECK)[1:], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "1270 rows read, 1270 kept (train 768, dev 197, test 305), 0 rejected" in out.stdout
    assert "- name: qa_pairs" in out.stdout and "scale: [0, 1]" in out.stdout and "d: 0.2" in out.stdout
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_the_example_without_a_mirror_says_what_to_pass_instead_of_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts/own_data_example.py"), "--mirror",
                           str(tmp_path / "none")],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no STS15/STS16 raw files under" in done.stderr and "pass --mirror PATH" in done.stderr
    assert not (tmp_path / "data").exists()
