"""New data -> the retrain: rows appended to a declared table after the same checks prepare makes, the event the
retrain deployment's trigger expects, and which tables gained or lost rows."""

import pandas as pd
import pytest

from pipelines.product.data_events import DATA_EVENT, project_resource, retrain_trigger, table_changes
from stsreg.product.data.append import AddRequest, append_rows
from stsreg.infra.config import StsTableColumns, StsTableSource
from stsreg.infra.errors import InputError
from tests.conftest import tiny_sts


def _table(tmp_path, n=200, seed=0, ext=".csv"):
    t = tiny_sts(n, seed)
    path = tmp_path / f"data/tables/pairs{ext}"
    path.parent.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame({"a": t.sentence1, "b": t.sentence2, "s": t.score})
    df.to_csv(path, index=False) if ext == ".csv" else path.write_text(df.to_json(orient="records", lines=True))
    return StsTableSource(name="pairs", file=f"data/tables/pairs{ext}",
                          columns=StsTableColumns(sentence1="a", sentence2="b", score="s"), scale=(0.0, 5.0), d=1.0)


@pytest.mark.parametrize("ext", [".csv", ".jsonl"])
def test_rows_are_appended_in_the_tables_own_format(tmp_path, ext):
    from stsreg.product.data.user_tables import read_table

    table = _table(tmp_path, ext=ext)
    new = tmp_path / "new.csv"
    t = tiny_sts(40, seed=9)
    pd.DataFrame({"a": t.sentence1, "b": t.sentence2, "s": t.score}).to_csv(new, index=False)
    before, _, _ = read_table(table, tmp_path)
    assert append_rows(tmp_path, table, AddRequest(table.name, new)).added == 40
    after, _, _ = read_table(table, tmp_path)
    assert len(after) == len(before) + 40
    changes = table_changes(before, after)
    assert changes == {"pairs": {"added": 40, "removed": 0}}


def test_rows_with_other_columns_are_refused_and_nothing_is_written(tmp_path):
    table = _table(tmp_path)
    original = (tmp_path / table.file).read_bytes()
    wrong = tmp_path / "new.csv"
    pd.DataFrame({"x": ["a"], "y": ["b"], "z": [1.0]}).to_csv(wrong, index=False)
    with pytest.raises(InputError, match=r"columns \['x', 'y', 'z'\] differ"):
        append_rows(tmp_path, table, AddRequest(table.name, wrong))
    assert (tmp_path / table.file).read_bytes() == original


def test_the_trigger_expects_the_event_of_this_project_only(tmp_path):
    trigger = retrain_trigger(tmp_path)
    assert trigger.expect == {DATA_EVENT}
    assert trigger.match.model_dump()["prefect.resource.id"] == project_resource(tmp_path)["prefect.resource.id"]
    assert project_resource(tmp_path / "other") != project_resource(tmp_path)


def test_table_changes_counts_by_content_not_by_position():
    a = pd.DataFrame({"dataset": ["t"] * 3, "sentence1": ["x", "y", "z"], "sentence2": ["1", "2", "3"],
                      "score": [1.0, 2.0, 3.0]})
    b = pd.concat([a.iloc[[2, 0]], pd.DataFrame({"dataset": ["t", "u"], "sentence1": ["w", "v"],
                                                 "sentence2": ["4", "5"],
                                                 "score": [4.0, 5.0]})])
    assert table_changes(a, b) == {"t": {"added": 1, "removed": 1}, "u": {"added": 1, "removed": 0}}
    assert table_changes(a, a.iloc[::-1]) == {}


def test_the_event_message_says_what_happened_to_it(tmp_path):
    """With PREFECT_API_URL pointing at a stopped server, `data add` used to print "event ... sent" after connection
    errors; now it says it was not delivered, why, and what to run instead."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.product.data_events import emit_data_changed
    from tests.conftest import free_port

    stopped = f"http://127.0.0.1:{free_port()}/api"
    with temporary_settings({PREFECT_API_URL: stopped}):
        said = emit_data_changed(tmp_path, "pairs", 3)
    assert (
        said.startswith("event stsreg.data.changed NOT delivered") and stopped in said and "dvc repro promote" in said
    )
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        said = emit_data_changed(tmp_path, "pairs", 3)
    assert said.startswith("no Prefect server in use") and "dvc repro promote" in said
