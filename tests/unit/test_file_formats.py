"""The table file formats are declared once (stsreg.product.data.table_files.FILE_FORMATS: name, extensions, reader,
how it takes new rows): one entry adds a format that prepare's reading, `data check` and `data add` all take."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

ADD_ONE = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    import pandas as pd
    from stsreg.product.data import format_writers, table_files as tf

    # pipe-separated values: one declaration, the delimited reader and writer with another delimiter
    tf.FILE_FORMATS += (tf.FileFormat("psv", (".psv",), tf.read_delimited("|"), format_writers.append_delimited),)
    from stsreg.infra.config import StsTableColumns, StsTableSource
    from stsreg.product.data.append import AddRequest, append_rows, prepare_check
    from stsreg.product.data.check import TableToCheck, check
    from stsreg.product.data.user_tables import read_table

    project = Path(sys.argv[1])
    (project / "data/tables").mkdir(parents=True)
    rows = [f"a man plays {i}|someone plays {i}|{i % 6}" for i in range(120)]
    (project / "data/tables/pairs.psv").write_text("sentence1|sentence2|score\\n" + "\\n".join(rows) + "\\n")
    table = StsTableSource(name="pairs", file="data/tables/pairs.psv", columns=StsTableColumns(), scale=(0.0, 5.0))
    kept, rejects, counts = read_table(table, project)
    pd.DataFrame({"sentence1": ["new one", "new two"], "sentence2": ["b", "c"], "score": ["1", "2"]}).to_csv(
        project / "new.csv", index=False)
    added = append_rows(project, table, AddRequest(table.name, project / "new.csv"), check=prepare_check())
    grown, _, _ = read_table(table, project)
    preview = check(TableToCheck(str(project / "data/tables/pairs.psv"), "sentence1", "sentence2", "score"))
    print(json.dumps({"kept": len(kept), "rejected": len(rejects), "added": added.added, "grown": len(grown),
                      "tail": (project / "data/tables/pairs.psv").read_text().splitlines()[-1],
                      "preview": preview.splitlines()[0]}))
''')


def test_one_entry_adds_a_file_format_everywhere(tmp_path):
    run = subprocess.run([sys.executable, "-c", ADD_ONE, str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["kept"] == 120 and out["rejected"] == 0
    assert out["added"] == 2 and out["grown"] == 122 and out["tail"] == "new two|c|2"
    assert "122 rows read, 122 kept" in out["preview"]


def test_every_declared_format_reads_what_it_writes():
    from stsreg.product.data.table_files import FILE_FORMATS, formats

    assert sorted(formats()) == [".csv", ".json", ".jsonl", ".parquet", ".tsv"]
    assert len({f.name for f in FILE_FORMATS}) == len(FILE_FORMATS)
    assert all(callable(f.read) and callable(f.append) for f in FILE_FORMATS)
