"""New labelled data starts a retrain, in Prefect's own way: an event the project emits, a trigger on the deployment.

``stsreg data add ROWS --table NAME`` appends rows to a declared table (checked first through the same reading
path ``prepare`` uses: a file it would refuse is refused, and nothing is appended), then emits the Prefect event
:data:`DATA_EVENT` about the project's resource (:func:`project_resource`). The deployment ``stsreg-retrain/weekly``
carries a :class:`~prefect.events.DeploymentEventTrigger` on that event for that project (``stsreg deploy``), so the
retrain starts at once instead of at the next scheduled run; DVC then sees ``data/tables`` changed and reruns from
``prepare``, and the retrain report says which tables gained or lost rows and what the gate decided.

    stsreg data add new_rows.csv --table support      # appends, then emits stsreg.data.changed
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: The event a data change emits (the retrain deployment's trigger expects it).
DATA_EVENT = "stsreg.data.changed"


def project_resource(project: Path) -> dict[str, str]:
    """The Prefect resource an event is about: this project folder (two projects on one server never cross)."""
    path = project.resolve().as_posix()
    return {"prefect.resource.id": f"stsreg.project.{path}", "prefect.resource.name": project.resolve().name}


def retrain_trigger(project: Path):
    """The retrain deployment's trigger: one run per :data:`DATA_EVENT` about ``project`` (Prefect's own triggers)."""
    from prefect.events import DeploymentEventTrigger

    return DeploymentEventTrigger(name="labelled data added", expect={DATA_EVENT},
                                  match={"prefect.resource.id": project_resource(project)["prefect.resource.id"]},
                                  parameters={"project_dir": str(project.resolve())})


def append_rows(project: Path, table, rows_file: Path) -> int:
    """Append the rows of ``rows_file`` (any supported format, the table's own column names) to declared ``table``'s
    file, in the file's format; returns how many. Refuses (InputError, nothing written) a file whose columns differ;
    :func:`add_rows` checks the grown table as ``prepare`` reads it."""
    from stsreg.infra import atomic
    from stsreg.infra.errors import InputError
    from stsreg.product.data.user_tables import read_frame

    new, _ = read_frame(rows_file)
    target = project / table.file
    current, _ = read_frame(target)
    if list(new.columns) != list(current.columns):
        raise InputError(f"{rows_file}: columns {list(new.columns)} differ from {table.file}'s {list(current.columns)}")
    merged = pd.concat([current, new], ignore_index=True)
    suffix = target.suffix.lower()
    if suffix in (".csv", ".tsv"):
        text = merged.to_csv(index=False, sep="," if suffix == ".csv" else "\t")
        atomic.write_text(target, text)
    elif suffix in (".jsonl", ".json"):
        atomic.write_text(target, merged.to_json(orient="records", lines=True, force_ascii=False))
    else:
        atomic.to_parquet(merged, target)
    return len(new)


def add_rows(project: Path, tables, name: str, rows_file: Path) -> tuple:
    """Append ``rows_file`` to the declared table ``name`` (of ``tables``, ``prepare.sts_tables``), check the grown
    table as ``prepare`` will read it (refused whole: the file is put back, nothing appended), then emit
    :data:`DATA_EVENT`. Returns (the table, rows added, whether a Prefect server received the event)."""
    from stsreg.infra.errors import InputError
    from stsreg.product.data.user_tables import read_table

    declared = {t.name: t for t in tables if not t.reader}  # the public tables are read from the mirror, not grown
    if name not in declared:
        raise InputError(f"--table {name!r} is not a table of yours in prepare.sts_tables (yours: {sorted(declared)})")
    table = declared[name]
    backup = (project / table.file).read_bytes()
    added = append_rows(project, table, rows_file)
    try:
        read_table(table, project)
    except InputError:
        (project / table.file).write_bytes(backup)
        raise
    return table, added, emit_data_changed(project, table.name, added)


def emit_data_changed(project: Path, table: str, rows_added: int) -> bool:
    """Emit :data:`DATA_EVENT` to the Prefect server in use; returns whether one was there to receive it."""
    from prefect.events import emit_event
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        return False
    from prefect.events.worker import EventsWorker

    emit_event(event=DATA_EVENT, resource=project_resource(project),
               payload={"table": table, "rows_added": rows_added})
    EventsWorker.drain_all()  # events go out from a background worker: send it before the command exits
    return True


def table_changes(before: pd.DataFrame | None, after: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Rows added and removed per table between two prepared STS tables (matched by content: sentence1, sentence2,
    score), only tables that changed."""
    key = ["dataset", "sentence1", "sentence2", "score"]

    def counted(df: pd.DataFrame) -> pd.DataFrame:
        return df[key].assign(n=df.groupby(key, sort=False).cumcount())

    a = counted(after)
    if before is None:
        return {t: {"added": int(n), "removed": 0} for t, n in a.dataset.value_counts().items()}
    both = counted(before).merge(a, on=[*key, "n"], how="outer", indicator=True)
    out = {}
    for table, rows in both.groupby("dataset"):
        added, removed = int((rows._merge == "right_only").sum()), int((rows._merge == "left_only").sum())
        if added or removed:
            out[table] = {"added": added, "removed": removed}
    return out
