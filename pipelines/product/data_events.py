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

import time
from pathlib import Path

import pandas as pd

from stsreg.infra.local_servers import healthy
from stsreg.product.champion_pin import PIN_FILE, pin_champion
from stsreg.product.data.append import add_rows

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
                                  # the event's payload (table, rows, when the add began) starts the loop's clock
                                  parameters={"project_dir": str(project.resolve()), "trigger": "{{ event.payload }}"})


def add_and_emit(project: Path, tables, request):
    """:func:`stsreg.product.data.append.add_rows` of ``request`` (an
    :class:`~stsreg.product.data.append.AddRequest`), then, when rows were added, the champion pinned for the retrain
    (:func:`pin_for_retrain`) and :data:`DATA_EVENT` emitted. Returns (the table, what was added, what became of the
    pin and the event: a sentence)."""
    began = time.time()  # the loop's clock starts when the rows are handed over
    table, added = add_rows(project, tables, request)
    if not added.added:
        return table, added, "nothing added, no event sent"
    return table, added, f"{pin_for_retrain(project)}; {emit_data_changed(project, table.name, added.added, began)}"


def pin_for_retrain(project: Path) -> str:
    """Pin the registry's champion in the project's ``champion.json`` (:mod:`stsreg.product.champion_pin`): the rows
    just added are what the next retrain learns, from today's champion; a sentence saying what is pinned. A registry
    that cannot be read leaves the pin as it was and says so (the rows are added either way; the retrain flow pins
    again before it runs)."""
    try:
        pin, changed = pin_champion(project / PIN_FILE)
    except Exception as exc:  # noqa: BLE001 - the add has happened; the pin is retried by the retrain flow
        return f"{PIN_FILE} not updated ({type(exc).__name__}: {str(exc)[:200]})"
    return f"{PIN_FILE}: {pin.words()}{' (pinned)' if changed else ''}"


RETRAIN_BY_HAND = "`dvc repro promote` retrains and gates"


def emit_data_changed(project: Path, table: str, rows_added: int, added_at: float | None = None) -> str:
    """Emit :data:`DATA_EVENT` to the Prefect server in use (payload: ``table``, ``rows_added``, ``added_at``: epoch
    seconds when the add began, default now); returns what happened, in a sentence a person can act on: sent (the
    retrain deployment's trigger starts it), or not delivered and why, and what to run instead."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return f"no Prefect server in use: {RETRAIN_BY_HAND} (or `make servers` + `make deploy` for the trigger)"

    if not healthy(url.rstrip("/") + "/health", timeout=3.0):
        return (f"event {DATA_EVENT} NOT delivered: the Prefect server {url} does not answer; {RETRAIN_BY_HAND} "
                "(or start the server: `make servers`)")
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    event = emit_event(event=DATA_EVENT, resource=project_resource(project),
                       payload={"table": table, "rows_added": rows_added, "added_at": added_at or time.time()})
    EventsWorker.drain_all()  # events go out from a background worker: send it before the command exits
    if event is None:
        return f"event {DATA_EVENT} NOT delivered (Prefect did not emit it); {RETRAIN_BY_HAND}"
    return f"event {DATA_EVENT} sent to {url}: a deployment triggered by it (`make deploy`'s retrain) starts"


def table_changes(before: pd.DataFrame | None, after: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Rows added and removed per table between two prepared STS tables (matched by content:
    :data:`stsreg.product.data.schemas.ROW_KEY`), only tables that changed."""
    from stsreg.product.data.schemas import ROW_KEY as key

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
