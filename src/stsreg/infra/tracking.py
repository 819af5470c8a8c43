"""MLflow tracking: one run per flow run, created by the flow, its ``run_id`` passed explicitly.

Everything goes through ``MlflowClient`` (no ambient active run: Prefect tasks may run in threads).
Default store: ``sqlite:///mlflow/mlflow.db`` with artifacts under ``mlflow/artifacts``; ``MLFLOW_TRACKING_URI``
points it at a server instead.

The training loop never calls MLflow: it calls a :class:`MetricBuffer`, which sends metrics in batches.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

DEFAULT_TRACKING_URI = "sqlite:///mlflow/mlflow.db"


def tracking_uri(project: Path | None = None) -> str:
    """``MLFLOW_TRACKING_URI``, else the embedded store: relative to the working directory, or to ``project``
    (absolute) for code that may run from another folder (flows started by a Prefect worker)."""
    if "MLFLOW_TRACKING_URI" in os.environ:
        return os.environ["MLFLOW_TRACKING_URI"]
    return embedded_uri(project) if project else DEFAULT_TRACKING_URI


def embedded_uri(project: Path) -> str:
    """The embedded store of ``project`` (absolute), whatever the environment names."""
    return f"sqlite:///{project.resolve() / 'mlflow' / 'mlflow.db'}"


def client(uri: str | None = None):
    from mlflow.tracking import MlflowClient

    uri = uri or tracking_uri()
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        db.parent.mkdir(parents=True, exist_ok=True)
        relocate_store(db)
    return MlflowClient(tracking_uri=uri)


#: Where the embedded store keeps paths of its own folder: (table, column) of the MLflow schema.
_PATH_COLUMNS = (("experiments", "artifact_location"), ("runs", "artifact_uri"), ("model_versions", "storage_location"),
                 ("logged_models", "artifact_location"))


def relocate_store(db: Path) -> list[str]:
    """An embedded store (``mlflow/mlflow.db``) whose project folder was copied or moved still names the old folder
    in every artifact location, so new runs would write there and old artifacts be read from there. Each old
    ``.../mlflow/artifacts`` root is rewritten to this store's own (``mlflow/artifacts`` beside ``db``), in one
    transaction; returns the roots it moved (nothing when the store is where it was made)."""
    if not db.is_file():
        return []
    here = (db.resolve().parent / "artifacts").as_uri()
    with sqlite3.connect(db) as con:
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "experiments" not in tables:
            return []
        roots = {loc[: loc.rindex("/mlflow/artifacts") + len("/mlflow/artifacts")]
                 for (loc,) in con.execute("SELECT artifact_location FROM experiments")
                 if loc and loc.startswith("file://") and "/mlflow/artifacts" in loc}
        moved = sorted(r for r in roots if r != here)
        for old in moved:
            for old_form, new_form in ((old, here), (old.removeprefix("file://"), here.removeprefix("file://"))):
                for table, column in _PATH_COLUMNS:
                    if table in tables:
                        con.execute(f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                                    f"WHERE substr({column}, 1, ?) = ?", (new_form, len(old_form) + 1, len(old_form),
                                                                          old_form))
    return moved


#: The experiment tag MLflow's UI reads to choose an experiment's first page: without it (MLflow 3) an experiment opens
#: on its GenAI overview ("No data available") and the training runs hide behind another tab.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


def label_experiment(c, exp) -> None:
    """Tag ``exp`` (an MLflow Experiment) with :data:`EXPERIMENT_KIND` unless it has a kind already."""
    key, value = EXPERIMENT_KIND
    if key not in (exp.tags or {}):
        c.set_experiment_tag(exp.experiment_id, key, value)


def experiment_id(c, name: str) -> str:
    """The id of experiment ``name``, created (labelled as model training, :data:`EXPERIMENT_KIND`) if new."""
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        label_experiment(c, exp)
        return exp.experiment_id
    artifact_root = None
    uri = c.tracking_uri
    if uri.startswith("sqlite:///"):  # embedded store: artifacts beside the database (mlflow/artifacts), not ./mlruns
        artifact_root = (Path(uri.removeprefix("sqlite:///")).resolve().parent / "artifacts").as_uri()
    return c.create_experiment(name, artifact_location=artifact_root, tags=dict([EXPERIMENT_KIND]))


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), with ``native bf16`` when it has it: speed figures depend on both."""
    from stsreg.infra.runtime import cpu_flags

    name = platform.processor() or platform.machine()
    try:
        name = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name}, {os.cpu_count()} cores" + (", native bf16" if {"avx512_bf16", "amx_bf16"} & cpu_flags() else "")


def environment_tags(device: str) -> dict[str, str]:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
            "cuda": str(torch.version.cuda), "device": device, "git_commit": git_commit(), "host_cpu": cpu_name()}


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = json.dumps(v) if isinstance(v, (list, tuple)) else str(v)
    return out


def start_run(experiment: str, run_name: str, params: dict, tags: dict[str, str], uri: str | None = None) -> str:
    """Create a run with resolved params and tags in the store ``uri`` (default :func:`tracking_uri`); returns its
    id."""
    from mlflow.entities import Param

    c = client(uri)
    run = c.create_run(experiment_id(c, experiment), run_name=run_name, tags=tags)
    items = [Param(k, v[:6000]) for k, v in flatten(params).items()]
    for i in range(0, len(items), 100):
        c.log_batch(run.info.run_id, params=items[i:i + 100])
    return run.info.run_id


def end_run(run_id: str, status: str = "FINISHED", uri: str | None = None) -> None:
    client(uri).set_terminated(run_id, status=status)


class MetricBuffer:
    """Collects (key, value, step) and sends them to MLflow in batches of ``flush_every``.

    ``value`` may be a 0-d tensor (a training loss still on its device): it is read at flush time, so the training
    loop does not wait for the device at every step."""

    def __init__(self, run_id: str | None, flush_every: int = 200, uri: str | None = None):
        self.run_id, self.flush_every, self.pending, self.uri = run_id, flush_every, [], uri

    def __call__(self, key: str, value: float, step: int) -> None:
        if self.run_id is None:
            return
        self.pending.append((key, value, int(time.time() * 1000), int(step)))
        if len(self.pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if self.run_id and self.pending:
            from mlflow.entities import Metric

            metrics = [Metric(key, float(value), ts, step) for key, value, ts, step in self.pending]
            c = client(self.uri)
            for i in range(0, len(metrics), 1000):
                c.log_batch(self.run_id, metrics=metrics[i:i + 1000])
            self.pending = []


def log_metrics(run_id: str, metrics: dict[str, float], step: int = 0, uri: str | None = None) -> None:
    """Log a flat dict of numeric metrics at one step (non-numbers and booleans are skipped)."""
    buffer = MetricBuffer(run_id, flush_every=10**9, uri=uri)
    for key, value in sorted(metrics.items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            buffer(key, value, step)
    buffer.flush()


def log_report(run_id: str, metrics: dict, folder: str | os.PathLike, files, artifact_path: str) -> None:
    """A report's last step: its headline ``metrics`` (numbers only) and those of ``files`` in ``folder`` that exist
    (a table with no paired test has no paired.csv), logged to ``run_id`` under ``artifact_path``."""
    log_metrics(run_id, metrics)
    c = client()
    for name in files:
        if (Path(folder) / name).exists():
            c.log_artifact(run_id, str(Path(folder) / name), artifact_path=artifact_path)


@contextmanager
def tracked_run(experiment: str, run_name: str, params: dict, tags: dict[str, str], uri: str | None = None):
    """One MLflow run (in the store ``uri``, default :func:`tracking_uri`) around a block: yields a
    :class:`MetricBuffer` (``.run_id``, ``.uri``), flushes it at the end, logs the block's ``wall_seconds`` and
    closes the run FINISHED, or FAILED when the block raises (even KeyboardInterrupt). ``.uri`` is the store resolved
    once here, never None: code handed it (a registry download, say) must not fall back to MLflow's process-wide
    default, which is ``./mlflow.db`` in whatever folder the command runs."""
    uri = uri or tracking_uri()
    run_id = start_run(experiment, run_name, params, tags, uri)
    buffer = MetricBuffer(run_id, uri=uri)
    started = time.monotonic()
    try:
        yield buffer
    except BaseException:
        buffer.flush()
        end_run(run_id, "FAILED", uri)
        raise
    buffer("wall_seconds", time.monotonic() - started, 0)
    buffer.flush()
    end_run(run_id, uri=uri)
