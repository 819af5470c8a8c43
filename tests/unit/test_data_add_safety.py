"""``stsreg data add`` never writes what ``prepare`` would not read back exactly: Parquet tables with categorical,
nullable and string columns grow without a null, a value the file cannot hold (a character its encoding lacks, a word
in a numeric column) is refused in one line naming the row, UTF-16 tables grow without blank lines, a grown table
prepare would refuse (its reject cap) leaves the file untouched (judged on a copy), and an add waits for a running
``dvc repro``."""

import subprocess
import sys
import time

import pandas as pd
import pytest

from stsreg.infra.config import StsTableColumns, StsTableSource
from stsreg.infra.errors import InputError
from stsreg.infra.locking import data_write_lock
from stsreg.product.data.append import AddRequest, add_rows, append_rows, prepare_check
from stsreg.product.data.table_files import read_frame
from stsreg.product.data.user_tables import read_table
from tests.conftest import tiny_sts

COLUMNS = ["sentence1", "sentence2", "score"]


def _declare(tmp_path, ext: str, **kw) -> StsTableSource:
    (tmp_path / "data/tables").mkdir(parents=True, exist_ok=True)
    return StsTableSource(name="mine", file=f"data/tables/mine{ext}", columns=StsTableColumns(), scale=(0.0, 5.0),
                          **kw)


def _pairs(n: int, seed: int, tag: str = "") -> pd.DataFrame:
    t = tiny_sts(n, seed)
    return pd.DataFrame({"sentence1": [s + tag for s in t.sentence1], "sentence2": list(t.sentence2),
                         "score": [round(float(s), 1) for s in t.score]})


def _new_rows(tmp_path, frame: pd.DataFrame, name: str = "new.csv"):
    path = tmp_path / name
    frame.astype(str).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("dtypes", [
    {"sentence1": "category", "sentence2": "category", "score": "category"},   # pandas' form for repeated labels
    {"sentence1": "string", "sentence2": "string", "score": "Float64"},        # nullable types
    {"sentence1": "string[pyarrow]", "sentence2": "object", "score": "float32"},
])
def test_parquet_tables_of_every_column_type_grow_without_a_null(tmp_path, dtypes):
    table = _declare(tmp_path, ".parquet")
    path = tmp_path / table.file
    old = _pairs(200, 0)
    old.astype(dtypes).to_parquet(path, index=False)
    as_read = [str(t) for t in pd.read_parquet(path).dtypes]  # the file's own schema (a float category is a double)
    new = _pairs(59, 7, " (new)")
    added = append_rows(tmp_path, table, AddRequest(table.name, _new_rows(tmp_path, new)), check=prepare_check())
    assert added.added == 59
    grown = pd.read_parquet(path)
    assert len(grown) == 259 and not grown.isna().any().any()
    assert [str(t) for t in grown.dtypes] == as_read
    tail = grown.tail(59).reset_index(drop=True)
    assert list(tail.sentence1.astype(str)) == list(new.sentence1)
    assert [float(s) for s in tail.score] == pytest.approx(list(new.score))
    kept, rejects, _ = read_table(table, tmp_path)
    assert len(kept) + len(rejects) == 259 and rejects.empty
    assert sorted(p.name for p in (tmp_path / "data/tables").iterdir()) == ["mine.parquet"]  # no lock file left


def test_a_word_in_a_numeric_parquet_column_is_refused_and_the_file_stays(tmp_path):
    table = _declare(tmp_path, ".parquet")
    path = tmp_path / table.file
    _pairs(200, 0).to_parquet(path, index=False)
    before = path.read_bytes()
    rows = _pairs(5, 3, " x").astype(str)
    rows.loc[2, "score"] = "n/a"
    with pytest.raises(InputError, match=r"line 4: 'n/a' in column 'score' is not a number"):
        append_rows(tmp_path, table, AddRequest(table.name, _new_rows(tmp_path, rows)), check=prepare_check())
    assert path.read_bytes() == before


def test_a_character_the_tables_encoding_lacks_is_refused_in_one_line(tmp_path):
    table = _declare(tmp_path, ".csv", encoding="cp1252")
    path = tmp_path / table.file
    _pairs(200, 0).assign(sentence1=lambda d: d.sentence1 + " café").to_csv(path, index=False, encoding="cp1252")
    before = path.read_bytes()
    rows = _pairs(3, 4, " y").astype(str)
    rows.loc[1, "sentence2"] = "a guitar ♫ plays"
    with pytest.raises(InputError) as err:
        append_rows(tmp_path, table, AddRequest(table.name, _new_rows(tmp_path, rows)), check=prepare_check())
    assert "line 3: '♫' cannot be written in the table's encoding cp1252" in str(err.value)
    assert len(str(err.value).splitlines()) == 1 and path.read_bytes() == before


@pytest.mark.parametrize("ext,sep", [(".tsv", "\t"), (".csv", ",")])
def test_utf16_tables_grow_without_blank_lines(tmp_path, ext, sep):
    table = _declare(tmp_path, ext)
    path = tmp_path / table.file
    _pairs(200, 0).to_csv(path, sep=sep, index=False, encoding="utf-16")  # a BOM, then UTF-16 LE: Excel's export
    before = read_frame(path)
    new = _pairs(20, 9, " (u16)")
    request = AddRequest(table.name, _new_rows(tmp_path, new))
    assert append_rows(tmp_path, table, request, check=prepare_check()).added == 20
    after = read_frame(path)
    assert len(after.frame) == len(before.frame) + 20 and after.rejects == before.rejects == []
    assert list(after.frame.sentence1.tail(20)) == list(new.sentence1)
    assert path.read_bytes().count("\n\n".encode("utf-16-le")) == 0


def test_an_object_a_list_a_number_or_a_boolean_is_not_a_sentence(tmp_path):
    table = _declare(tmp_path, ".jsonl")
    path = tmp_path / table.file
    rows = _pairs(200, 0).to_dict("records")
    rows[3]["sentence1"] = {"text": "A man plays.", "lang": "en"}
    rows[7]["sentence2"] = ["two", "sentences"]
    rows[9]["sentence1"], rows[11]["sentence2"] = 42, True
    pd.DataFrame(rows).to_json(path, orient="records", lines=True, force_ascii=False)
    kept, rejects, counts = read_table(table, tmp_path)
    assert list(rejects.line) == [4, 8, 10, 12]
    assert set(rejects.reason) == {"a sentence is not text (an object, a list, a number or a boolean)"}
    assert counts["rejected"] == 4 and not kept.sentence1.str.contains("'lang'").any()


def test_an_add_prepare_would_refuse_is_restored_byte_for_byte(tmp_path):
    table = _declare(tmp_path, ".csv")
    path = tmp_path / table.file
    table_rows = _pairs(1000, 0).astype(str)
    table_rows.loc[:19, "score"] = "n/a"  # the table's own 20 bad rows of 1,025 after the add: 1.95% > the 1% cap
    table_rows.to_csv(path, index=False)
    before, written = path.read_bytes(), path.stat().st_mtime_ns
    rows = _pairs(25, 5, " z").astype(str)  # good rows: the grown table is what prepare would refuse
    with pytest.raises(InputError, match=r"would reject 20 of 1025 rows .* prepare would refuse it \(line \d+: score "
                                         r"is not a number\)"):
        add_rows(tmp_path, [table], AddRequest("mine", _new_rows(tmp_path, rows), max_rejected_fraction=0.01))
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == written  # judged on a copy: the file itself was never written


HOLD_DVC_LOCK = """
import sys, time
from dvc.lock import Lock
lock = Lock(sys.argv[1])
lock.lock()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.unlock()
"""


def _hold_dvc_lock(project, seconds: float) -> subprocess.Popen:
    """A process holding DVC's repository lock of ``project`` (as a running ``dvc repro`` does) for ``seconds``."""
    (project / ".dvc/tmp").mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_DVC_LOCK, str(project / ".dvc/tmp/lock"), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_an_add_waits_for_a_running_dvc_repro_and_gives_up_writing_nothing(tmp_path, capsys):
    table = _declare(tmp_path, ".csv")
    path = tmp_path / table.file
    _pairs(200, 0).to_csv(path, index=False)
    holder = _hold_dvc_lock(tmp_path, 60)
    try:
        with pytest.raises(TimeoutError, match=r"holding .dvc/tmp/lock \(waited 1 s\): nothing was written"):
            with data_write_lock(tmp_path, timeout_s=1):
                path.write_text("never")
    finally:
        holder.kill()
        holder.wait()
    assert "for: a `dvc repro` or another DVC command holding .dvc/tmp/lock" in capsys.readouterr().err
    assert path.read_text() != "never"
    holder = _hold_dvc_lock(tmp_path, 4)
    start = time.monotonic()
    request = AddRequest(table.name, _new_rows(tmp_path, _pairs(10, 2, " w")))
    added = append_rows(tmp_path, table, request, check=prepare_check())
    assert added.added == 10 and time.monotonic() - start >= 3  # it waited for the repro to end, then added
    holder.wait()


def test_data_check_reads_a_cp1252_table_as_declared_and_refuses_it_read_as_utf8(tmp_path, monkeypatch, capsys):
    """`data check` used to propose training on a cp1252 table read as UTF-8, 10% of its rows rejected."""
    import stsreg.cli

    import shutil

    from tests.conftest import REPO

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    rows = _pairs(200, 0)
    rows.loc[::10, "sentence1"] = rows.sentence1[::10] + " café"  # every tenth row holds a byte UTF-8 cannot read
    rows.to_csv("pairs.csv", index=False, encoding="cp1252")
    assert stsreg.cli.main(["data", "check", "pairs.csv"]) == 2
    err = capsys.readouterr().err
    assert ("20 of 200 rows rejected (10.00% > prepare.max_rejected_fraction=0.01): prepare would refuse this table; "
            "20 of them are not valid UTF-8") in err and "--encoding cp1252" in err
    assert stsreg.cli.main(["data", "check", "pairs.csv", "--encoding", "cp1252"]) == 0
    out = capsys.readouterr().out
    assert "200 rows read, 200 kept" in out and "      encoding: cp1252" in out


HOLD_PIPELINE_LOCK = """
import sys, time
from pathlib import Path
from stsreg.infra.locking import pipeline_lock
with pipeline_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_an_add_waits_for_a_running_stage(tmp_path):
    """`prepare` (any stsreg stage) holds the project's pipeline lock while it reads the tables: an add started
    meanwhile lands after it, never between its reading and its end."""
    table = _declare(tmp_path, ".csv")
    _pairs(200, 0).to_csv(tmp_path / table.file, index=False)
    stage = subprocess.Popen([sys.executable, "-c", HOLD_PIPELINE_LOCK, str(tmp_path), "4"], stdout=subprocess.PIPE,
                             text=True)
    assert stage.stdout.readline().strip() == "held"
    start = time.monotonic()
    request = AddRequest(table.name, _new_rows(tmp_path, _pairs(10, 2, " v")))
    added = append_rows(tmp_path, table, request, check=prepare_check())
    assert added.added == 10 and time.monotonic() - start >= 3 and stage.wait(30) == 0


def test_each_added_row_is_judged_on_its_own_whatever_the_tables_reject_cap(tmp_path):
    """6 bad rows among 25 added to a large 0-5 table: under a 1% cap of the grown table they would pass; each is
    judged on its own, so the add is refused naming every line and reason, and the file stays as it was. --skip-bad
    adds the good rows and lists the bad ones."""
    table = _declare(tmp_path, ".csv")
    path = tmp_path / table.file
    _pairs(4000, 0).to_csv(path, index=False)
    before = path.read_bytes()
    rows = _pairs(25, 5, " z").astype(str)
    rows.loc[:4, "score"] = ["7", "12.5", "-1", "5.5", "40"]
    rows.loc[5, "sentence2"] = "   "
    new = _new_rows(tmp_path, rows)
    with pytest.raises(InputError, match=r"6 of the rows to add would be rejected by prepare \(line 2: score outside "
                                         r"the declared scale \[0, 5\]; line 3: .*line 7: empty sentence after "
                                         r"stripping whitespace\); nothing was added to data/tables/mine.csv "
                                         r"\(--skip-bad"):
        add_rows(tmp_path, [table], AddRequest("mine", new, max_rejected_fraction=0.01))
    assert path.read_bytes() == before

    _, added = add_rows(tmp_path, [table], AddRequest("mine", new, max_rejected_fraction=0.01, skip_bad=True))
    assert added.added == 19 and [line for line, _ in added.skipped] == list(range(2, 8))
    grown = read_frame(path).frame
    assert len(grown) == 4019 and list(grown.sentence1.tail(19)) == list(rows.sentence1.tail(19))
    assert path.read_bytes().startswith(before)  # appended after the earlier bytes, never a rewrite


def test_an_added_file_on_another_scale_is_refused_with_the_scale_it_looks_like(tmp_path):
    """20 rows scored 0-100 added to a 1-10 table: the few that land inside 1-10 are misread too, so the whole add is
    refused, --skip-bad included, saying what the file looks like."""
    table = StsTableSource(name="mine", file="data/tables/mine.csv", columns=StsTableColumns(), scale=(1.0, 10.0),
                           d=1.0)
    (tmp_path / "data/tables").mkdir(parents=True)
    path = tmp_path / table.file
    _pairs(2000, 0).assign(score=lambda d: (d.score * 9 / 5 + 1).round(1)).to_csv(path, index=False)
    before = path.read_bytes()
    rows = _pairs(20, 5, " z").astype(str)
    rows["score"] = [str(v) for v in (5, 10, 35, 60, 80, 95, 20, 45, 70, 90, 15, 30, 55, 65, 75, 85, 25, 40, 50, 100)]
    for skip_bad in (False, True):
        with pytest.raises(InputError, match=r"18 of its 20 rows score outside mine's scale \[1, 10\]; its scores run "
                                             r"5..100, which looks like a 0-100 scale: .*scale: \[0, 100\]"):
            add_rows(tmp_path, [table], AddRequest("mine", _new_rows(tmp_path, rows), skip_bad=skip_bad))
        assert path.read_bytes() == before


def test_a_null_in_an_added_parquet_row_refuses_the_add_naming_its_line(tmp_path):
    table = _declare(tmp_path, ".parquet")
    path = tmp_path / table.file
    frame = _pairs(300, 0).astype({"sentence1": "string", "sentence2": "string"})
    frame.to_parquet(path, index=False)
    before = path.read_bytes()
    new = _pairs(5, 3, " q").astype({"sentence1": "string", "sentence2": "string"})
    new.loc[2, "sentence2"] = pd.NA
    new.to_parquet(tmp_path / "new.parquet", index=False)
    with pytest.raises(InputError, match=r"1 of the rows to add would be rejected by prepare \(line 3: a sentence is "
                                         r"missing \(null\)\)"):
        add_rows(tmp_path, [table], AddRequest("mine", tmp_path / "new.parquet"))
    assert path.read_bytes() == before


def test_an_add_reads_its_rows_in_the_tables_declared_encoding_or_encoding_and_says_which(tmp_path, monkeypatch,
                                                                                           capsys):
    """A table declared `encoding: cp1252` takes cp1252 rows (they used to be refused as "not valid UTF-8"); a UTF-8
    table refuses them with the --encoding advice, and takes them with --encoding cp1252; the add says which it used."""
    import yaml

    import stsreg.cli
    from tests.conftest import REPO

    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for name, encoding in (("legacy", "cp1252"), ("plain", "auto")):
        path = tmp_path / f"data/tables/{name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        _pairs(200, 0).to_csv(path, index=False, encoding="cp1252" if encoding == "cp1252" else "utf-8")
        params["prepare"]["sts_tables"].append({"name": name, "file": f"data/tables/{name}.csv", "scale": [0, 5],
                                                "d": 1, "encoding": encoding})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    new = _pairs(10, 4, " café")
    new.to_csv(tmp_path / "new.csv", index=False, encoding="cp1252")

    assert stsreg.cli.main(["data", "add", "new.csv", "--table", "legacy"]) == 0
    assert "added 10 rows to data/tables/legacy.csv (legacy; read as cp1252" in capsys.readouterr().out
    assert (tmp_path / "data/tables/legacy.csv").read_bytes().count("café".encode("cp1252")) == 10

    before = (tmp_path / "data/tables/plain.csv").read_bytes()
    assert stsreg.cli.main(["data", "add", "new.csv", "--table", "plain"]) == 2
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err and "read as UTF-8" in err and "--encoding cp1252" in err
    assert (tmp_path / "data/tables/plain.csv").read_bytes() == before
    # read as cp1252, written in the table's own encoding (UTF-8)
    assert stsreg.cli.main(["data", "add", "new.csv", "--table", "plain", "--encoding", "cp1252"]) == 0
    assert "read as cp1252" in capsys.readouterr().out
    assert (tmp_path / "data/tables/plain.csv").read_bytes().count("café".encode("utf-8")) == 10


@pytest.mark.parametrize("cap", [0.01, 0.5])
def test_data_check_names_every_rejected_line_whatever_the_cap(tmp_path, monkeypatch, capsys, cap):
    """10 bad rows of 200: over the 1% cap the refusal names all 10 lines (not only the percentage); under a raised
    cap the preview lists all 10 (not the first 5)."""
    import yaml

    import stsreg.cli
    from tests.conftest import REPO

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["max_rejected_fraction"] = cap
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    rows = _pairs(200, 0).astype(str)
    rows.loc[::20, "score"] = "n/a"
    rows.to_csv("pairs.csv", index=False)
    code = stsreg.cli.main(["data", "check", "pairs.csv"])
    text = capsys.readouterr()
    shown = text.err if cap < 0.05 else text.out
    assert code == (2 if cap < 0.05 else 0)
    named = [line for line in range(2, 202, 20) if f"  {line}: score is not a number" in shown]
    assert named == list(range(2, 202, 20))
