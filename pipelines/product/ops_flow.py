"""Flows for scheduled operation (deployed by ``stsreg deploy``; any of them also runs by hand).

- ``stsreg-retrain``: ``dvc repro promote`` in the project (DVC decides what is stale: new data, new params or new
  code retrain; nothing stale = nothing runs), then reports what changed in the registry: a new version? promoted?
  why not? The report is a Prefect markdown artifact, ``reports/retrain/last_run.json`` (+ a line in
  ``history.jsonl``) and the return value.
- ``stsreg-champion-eval``: the 7-task evaluation of the model behind alias ``champion``, one MLflow run in
  experiment ``stsreg-champion``; the version gets ``last_eval.*`` tags (a daily health check of what is served).
- ``stsreg-profile-run``: ``dvc repro profile`` (the memory / step-time grid), on demand.

Every flow that runs DVC holds the project's pipeline lock (``.stsreg/pipeline.lock``) for its whole run, so
overlapping scheduled or manual runs queue instead of interleaving DVC stages and registry writes; the retrain
deployment also has a Prefect concurrency limit of 1. A failed ``dvc repro`` stops before the ``promote`` stage,
so the champion alias is never moved by a failed run.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from prefect import flow, get_run_logger, task

from pipelines.product.data_events import table_changes
from pipelines.product.heartbeat import EVERY_S, heartbeat
from pipelines.product.stoppable import stopping
from stsreg.product import registry
from stsreg.infra import tracking
from stsreg.infra.locking import held_env, pipeline_lock
from stsreg.product.registry import MODEL_NAME


def registry_state(uri: str, name: str = MODEL_NAME) -> dict:
    """``{"latest", "champion", "challenger"}`` version numbers (None where absent)."""
    c = tracking.client(uri)
    state = {"latest": max((int(v.version) for v in c.search_model_versions(f"name='{name}'")), default=None)}
    for alias in ("champion", "challenger"):
        v = registry.version_by_alias(c, name, alias)
        state[alias] = int(v.version) if v else None
    return state


@task(name="dvc-repro", task_run_name="dvc repro {target}")
def dvc_repro(project_dir: str, target: str, heartbeat_s: float = EVERY_S) -> list[str]:
    """Run ``dvc repro target`` in the project, streaming its output to the flow log (and, while a stage is silent,
    which stage runs and for how long, every ``heartbeat_s`` seconds); returns the stages that ran."""
    logger = get_run_logger()
    # the caller holds the pipeline lock: the stages dvc starts must not wait for it. Its own process group: a
    # cancelled or failed flow run stops dvc, the stage it runs and everything that stage started (stopping)
    proc = subprocess.Popen(["dvc", "repro", target], cwd=project_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=held_env(Path(project_dir)), start_new_session=True)
    ran, tail = [], []

    def now() -> str:
        return f"stage {ran[-1]}; last output: {tail[-1][:200]}" if ran and tail else "checking what is stale"

    with stopping(proc), heartbeat(logger, f"dvc repro {target}", heartbeat_s, now):
        for line in proc.stdout:
            line = line.rstrip()
            if line.startswith("Running stage"):
                ran.append(line.split("'")[1])
            if line.strip():
                tail = (tail + [line])[-40:]
                logger.info(line)
        code = proc.wait()
    if code != 0:
        raise RuntimeError(
            f"`dvc repro {target}` failed (exit {proc.returncode}) after stages {ran}:\n" + "\n".join(tail)
        )
    return ran


def _pairs(sts_file: Path):
    """The prepared STS table's pairs (None before the first prepare): what the retrain compares to say which tables
    gained or lost rows."""
    import pandas as pd

    return pd.read_parquet(sts_file, columns=["dataset", "sentence1", "sentence2",
                                              "score"]) if sts_file.exists() else None


def _tables_line(changed: dict) -> str:
    if not changed:
        return ""
    parts = [f"{t} +{c['added']}/-{c['removed']}" for t, c in sorted(changed.items())]
    return "tables changed (rows added/removed): " + ", ".join(parts) + ". "


def describe(before: dict, after: dict, ran: list[str], promotion: dict | None) -> str:
    """One paragraph: what the run changed in the registry, and why."""
    if not ran:
        return "nothing was stale: no stage ran, the registry is unchanged (champion v%s)" % after["champion"]
    text = f"stages run: {', '.join(ran)}. "
    if after["latest"] != before["latest"]:
        text += f"new version v{after['latest']} registered as challenger; "
        if after["champion"] != before["champion"]:
            text += f"promoted to champion (was v{before['champion']})"
        else:
            text += f"not promoted, champion stays v{after['champion']}"
        if promotion and promotion.get("challenger") == after["latest"]:
            text += f": {promotion['reason']}"
    else:
        text += f"no new version (the model did not change); champion v{after['champion']}"
    return text


@task(name="stage2-on-gpu-pool", task_run_name="stage 2 on pool {pool}")
def stage2_elsewhere(project_dir: str, pool: str, repo_url: str) -> dict:
    """Stage 2 on a worker of ``pool`` (:func:`pipelines.product.gpu_stage2.dispatch_stage2`)."""
    from pipelines.product.gpu_stage2 import dispatch_stage2

    out = dispatch_stage2(Path(project_dir), pool, repo_url)
    get_run_logger().info("stage 2 ran on %s (%s), flow run %s", out["host"], out["clone"], out["flow_run_id"])
    return out


@task(name="dvc-push")
def dvc_push(project_dir: str) -> bool:
    """``dvc push`` when the project has a default DVC remote (shared mode); returns whether it pushed."""
    from pipelines.product.gpu_stage2 import dvc_remote_url

    if not dvc_remote_url(Path(project_dir)):
        return False
    proc = subprocess.run(["dvc", "push"], cwd=project_dir, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"`dvc push` failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-2000:]}")
    return True


@flow(name="stsreg-retrain")
def retrain_flow(project_dir: str = ".", target: str = "promote", lock_timeout_s: float = 6 * 3600,
                 heartbeat_s: float = EVERY_S) -> dict:
    """DVC pipeline up to ``target`` under the pipeline lock, then a report of the registry change. With
    ``schedule.gpu_pool`` set, stage 2 runs on that pool's worker and everything else here; with a DVC remote set,
    the outputs are pushed at the end."""
    from prefect.artifacts import create_markdown_artifact

    from stsreg.infra.config import load_params

    project = Path(project_dir).resolve()
    uri = tracking.tracking_uri(project)
    schedule = load_params(project / "params.yaml").schedule
    started = time.time()
    remote = None
    sts_file = project / "data/prepared/sts.parquet"
    with pipeline_lock(project, lock_timeout_s):
        locked = time.time()
        before = registry_state(uri)
        tables_before = _pairs(sts_file)
        ran = []
        if schedule.gpu_pool and target == "promote":
            ran = dvc_repro(str(project), "stage1", heartbeat_s)
            if subprocess.run(["dvc", "status", "stage2", "--quiet"], cwd=project).returncode:  # stale: train it there
                remote = stage2_elsewhere(str(project), schedule.gpu_pool, schedule.repo_url)
                ran.append("stage2")
        ran += dvc_repro(str(project), target, heartbeat_s)
        pushed = dvc_push(str(project))
        after = registry_state(uri)
        changed = table_changes(tables_before, _pairs(sts_file)) if "prepare" in ran else {}
        released = time.time()
    promotion_file = project / "reports/registry/promotion.json"
    promotion = json.loads(promotion_file.read_text()) if promotion_file.exists() else None
    report = {"ran": ran, "tables_changed": changed, "stage2_remote": remote, "pushed": pushed, "before": before,
              "after": after,
              "new_version": after["latest"] != before["latest"],
              "promoted": after["champion"] != before["champion"],
              "summary": _tables_line(changed) + describe(before, after, ran, promotion),
              "started": started, "lock_acquired": locked, "lock_released": released}
    out = project / "reports/retrain/last_run.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    with open(out.with_name("history.jsonl"), "a") as fh:  # one line per retrain: an audit trail of the schedule
        fh.write(json.dumps(report) + "\n")
    get_run_logger().info("retrain: %s", report["summary"])
    create_markdown_artifact(key="retrain-report", description="What this retrain changed", markdown=(
        f"## Retrain report\n\n{report['summary']}\n\n| | latest | champion | challenger |\n|---|---|---|---|\n"
        f"| before | {before['latest']} | {before['champion']} | {before['challenger']} |\n"
        f"| after | {after['latest']} | {after['champion']} | {after['challenger']} |\n"))
    return report


@flow(name="stsreg-champion-eval")
def champion_eval_flow(project_dir: str = ".", params_path: str = "params.yaml",
                       sts_path: str = "data/prepared/sts.parquet", heartbeat_s: float = EVERY_S) -> dict:
    """Evaluate ``models:/sts-regression@champion`` on the prepared test sets with the release flow's evaluate task
    (one MLflow run in experiment ``stsreg-champion``); tags on the version. The flow-run log says every
    ``heartbeat_s`` seconds that the evaluation still runs."""
    from pipelines.product.release_flow import evaluate_task
    from stsreg.product import registry

    project = Path(project_dir).resolve()
    uri = tracking.tracking_uri(project)  # passed down explicitly: no process-wide MLflow state is set
    c = tracking.client(uri)
    version = c.get_model_version_by_alias(MODEL_NAME, "champion")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = registry.model_folder(version, uri, tmp)
        with heartbeat(get_run_logger(), f"evaluating champion v{version.version} on the test tables", heartbeat_s):
            metrics = evaluate_task(str(project / params_path), str(model_dir), str(project / sts_path),
                                    str(Path(tmp) / "eval"), uri=uri, experiment="stsreg-champion",
                                    run_name=f"champion-v{version.version}", tags={"model_version": version.version})
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    c.set_model_version_tag(MODEL_NAME, version.version, "last_eval.time", when)
    c.set_model_version_tag(MODEL_NAME, version.version, "last_eval.avg7_spearman", f"{metrics['avg7_spearman']:.2f}")
    c.set_model_version_tag(MODEL_NAME, version.version, "last_eval.run_id", metrics["run_id"])
    get_run_logger().info("champion v%s: avg7 %.2f", version.version, metrics["avg7_spearman"])
    return {"version": int(version.version), "run_id": metrics["run_id"], "avg7_spearman": metrics["avg7_spearman"],
            "avg7_unseen_spearman": metrics.get("avg7_unseen_spearman")}


@flow(name="stsreg-profile-run")
def profile_run_flow(project_dir: str = ".", lock_timeout_s: float = 6 * 3600) -> list[str]:
    """``dvc repro profile`` under the pipeline lock."""
    project = Path(project_dir).resolve()
    with pipeline_lock(project, lock_timeout_s):
        return dvc_repro(str(project), "profile")
