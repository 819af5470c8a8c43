"""Flows for scheduled operation (deployed by ``stsreg deploy``; any of them also runs by hand).

- ``stsreg-retrain``: the chain of ``dvc repro promote`` in the project, one stage at a time (:data:`CHAIN`: each a
  task, so the Prefect UI shows every phase with its time; DVC decides what is stale: new data, new params or new code
  retrain; nothing stale = nothing runs), then reports what changed in the registry (a new version? promoted? why
  not?) and the loop's clock (:mod:`stsreg.product.loop_clock`), after a promotion up to the moment the servers
  following ``@champion`` answer with it. The report is a Prefect markdown artifact,
  ``reports/retrain/last_run.json`` (+ a line in ``history.jsonl``) and the return value
  (:mod:`pipelines.product.retrain_report`).
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
from contextlib import ExitStack
from pathlib import Path

from prefect import flow, get_run_logger, task

from pipelines.product import retrain_report
from pipelines.product.data_events import table_changes
from pipelines.product.heartbeat import EVERY_S, heartbeat
from pipelines.product.kept_outputs import kept
from pipelines.product.stoppable import stopping
from stsreg.infra import tracking
from stsreg.infra.locking import held_env, pipeline_lock
from stsreg.product.champion_pin import PIN_FILE, pin_champion
from stsreg.product.loop_clock import Clock
from stsreg.product.registry import MODEL_NAME
from stsreg.product.runners.warm_start import nothing_learned
from stsreg.product.serving.announce import wait_for_version
from pipelines.product.gpu_stage2 import dispatch_stage2, dvc_remote_url
from stsreg.infra.config import load_params
from stsreg.product import registry

#: The stages ``dvc repro promote`` runs, in order: the retrain runs them one by one, each a task and a phase of its
#: clock (tests/unit/test_loop_clock.py checks this against dvc.yaml).
CHAIN = ("fetch", "prepare", "stage1", "stage2", "evaluate", "register", "promote")


@task(name="dvc-repro", task_run_name="dvc repro {target}")
def dvc_repro(project_dir: str, target: str, heartbeat_s: float = EVERY_S, single: bool = False) -> list[str]:
    """Run ``dvc repro target`` in the project (``single``: that stage only, ``--single-item``, when it is stale),
    streaming its output to the flow log (and, while a stage is silent, which stage runs and for how long, every
    ``heartbeat_s`` seconds); returns the stages that ran."""
    logger = get_run_logger()
    # the caller holds the pipeline lock: the stages dvc starts must not wait for it. Its own process group: a
    # cancelled or failed flow run stops dvc, the stage it runs and everything that stage started (stopping)
    cmd = ["dvc", "repro", *(["--single-item"] if single else []), target]
    proc = subprocess.Popen(cmd, cwd=project_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=held_env(Path(project_dir)), start_new_session=True)
    ran, tail = [], []

    def now() -> str:
        return f"stage {ran[-1]}; last output: {tail[-1][:200]}" if ran and tail else "checking what is stale"

    def left() -> str:  # what a stage stopped midway leaves: its last finished run's outputs
        return kept(Path(project_dir), ran[-1]) if ran else "no stage had started"

    with stopping(proc, on_stop=lambda: logger.warning("`dvc repro %s` stopped: %s", target, left())), \
            heartbeat(logger, f"dvc repro {target}", heartbeat_s, now):
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
            f"`dvc repro {target}` failed (exit {proc.returncode}) after stages {ran} ({left()}):\n" + "\n".join(tail)
        )
    return ran


@task(name="stage2-on-gpu-pool", task_run_name="stage 2 on pool {pool}")
def stage2_elsewhere(project_dir: str, pool: str, repo_url: str) -> dict:
    """Stage 2 on a worker of ``pool`` (:func:`pipelines.product.gpu_stage2.dispatch_stage2`)."""
    out = dispatch_stage2(Path(project_dir), pool, repo_url)
    get_run_logger().info("stage 2 ran on %s (%s), flow run %s", out["host"], out["clone"], out["flow_run_id"])
    return out


@task(name="dvc-push")
def dvc_push(project_dir: str) -> bool:
    """``dvc push`` when the project has a default DVC remote (shared mode); returns whether it pushed."""
    if not dvc_remote_url(Path(project_dir)):
        return False
    proc = subprocess.run(["dvc", "push"], cwd=project_dir, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"`dvc push` failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-2000:]}")
    return True


def _stages(project: Path, target: str, heartbeat_s: float, clock: Clock, gpu_pool: str, repo_url: str):
    """Run the chain up to ``target`` stage by stage (one task and one clock phase each; a target outside
    :data:`CHAIN`: one ``dvc repro target``); stage 2 on ``gpu_pool``'s worker when set and stale. A warm stage 2
    that learned nothing (:func:`stsreg.product.runners.warm_start.nothing_learned`: it kept the champion itself)
    ends the chain there: evaluating, registering and gating a copy of the champion would tell nothing. Returns
    (stages that ran, the remote stage 2's summary or None, what nothing learned found or None)."""
    ran, remote = [], None
    for stage in CHAIN[:CHAIN.index(target) + 1] if target in CHAIN else (target,):
        if stage in ("evaluate", "register", "promote") and "stage2" in ran:
            found = nothing_learned(_training_summary(project))
            if found:
                return ran, remote, found
        with clock.phase(stage) as phase:
            if stage == "stage2" and gpu_pool and subprocess.run(["dvc", "status", "stage2", "--quiet"],
                                                                  cwd=project).returncode:  # stale: train it there
                remote = stage2_elsewhere(str(project), gpu_pool, repo_url)
                ran.append(stage)
                phase["note"] = f"on pool {gpu_pool}"
            done = dvc_repro(str(project), stage, heartbeat_s, single=target in CHAIN)
            ran += [s for s in done if s not in ran]
            phase["ran"] = stage in ran
    return ran, remote, None


def _training_summary(project: Path) -> dict:
    path = project / "models/stage2/training_summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


@task(name="served", task_run_name="the server answers v{version}")
def served_task(project_dir: str, version: int, timeout_s: float) -> dict:
    """Wait until the servers following ``@champion`` answer with ``version``
    (:func:`stsreg.product.serving.announce.wait_for_version`)."""
    return wait_for_version(Path(project_dir), version, timeout_s)


@flow(name="stsreg-retrain")
def retrain_flow(project_dir: str = ".", target: str = "promote", lock_timeout_s: float = 6 * 3600,
                 heartbeat_s: float = EVERY_S, trigger: dict | None = None, serve_wait_s: float = 300.0) -> dict:
    """DVC pipeline up to ``target`` under the pipeline lock, stage by stage, then a report of the registry change
    and the loop's clock (:mod:`stsreg.product.loop_clock`). ``trigger``: the payload of the data event that started
    the run (``added_at``: when ``stsreg data add`` began, the clock's origin). After a promotion, it waits up to
    ``serve_wait_s`` for the running servers that follow ``@champion`` to answer with the new version. With
    ``schedule.gpu_pool`` set, stage 2 runs on that pool's worker and everything else here; with a DVC remote set,
    the outputs are pushed at the end."""
    started = time.time()
    project = Path(project_dir).resolve()
    uri = tracking.tracking_uri(project)
    params = load_params(project / "params.yaml")
    schedule, dev_table = params.schedule, params.stage2.dev_table
    sts_file = project / "data/prepared/sts.parquet"
    origin = (trigger or {}).get("added_at")
    clock = Clock(float(origin) if origin else None)
    if origin:
        clock.add("trigger", float(origin), started, note=f"{trigger.get('table')} +{trigger.get('rows_added')}")
    with ExitStack() as held:
        with clock.phase("lock"):
            held.enter_context(pipeline_lock(project, lock_timeout_s))
        locked = time.time()
        # what a warm stage 2 continues: the registry's champion, unless it is this checkout's own last stage 2
        pin_champion(project / PIN_FILE, uri, own_model=project / "models/stage2")
        before = retrain_report.registry_state(uri)
        tables_before = retrain_report.pairs(sts_file)
        ran, remote, learned_nothing = _stages(project, target, heartbeat_s, clock, schedule.gpu_pool,
                                               schedule.repo_url)
        pushed = dvc_push(str(project))
        after = retrain_report.registry_state(uri)
        changed = table_changes(tables_before, retrain_report.pairs(sts_file)) if "prepare" in ran else {}
        if learned_nothing and learned_nothing["new_rows"] is None and changed:  # every row replayed: not counted
            learned_nothing["new_rows"] = sum(c["added"] for c in changed.values())
        released = time.time()
    served = {"why": "no new champion"}
    if after["champion"] is not None and after["champion"] != before["champion"]:
        served = {"version": after["champion"], **served_task(str(project), after["champion"], serve_wait_s)}
        answered = [s["answered"] for s in served["servers"] if "answered" in s]
        served["answered"] = min(answered) if answered else None
        # from the lock's release to the first server's answer (not to when the poll noticed the others)
        clock.add("served", released, served["answered"] or time.time(),
                  note="answered" if answered else served.get("why", ""))
    promotion_file = project / "reports/registry/promotion.json"
    promotion = json.loads(promotion_file.read_text()) if promotion_file.exists() else None
    origin = retrain_report.stage2_origin(project, ran)
    report = {"ran": ran, "tables_changed": changed, "stage2_remote": remote, "pushed": pushed, "before": before,
              "after": after, "new_version": after["latest"] != before["latest"],
              "promoted": after["champion"] != before["champion"], "stage2_started_from": origin,
              "nothing_learned": learned_nothing,
              "summary": retrain_report.tables_line(changed)
              + retrain_report.describe(before, after, ran, promotion, origin, learned_nothing, dev_table),
              "started": started, "lock_acquired": locked,
              "lock_released": released, "served": served, "trigger": trigger, "clock": clock.as_dict()}
    retrain_report.write(project, report)
    get_run_logger().info("retrain: %s", report["summary"])
    return report


@flow(name="stsreg-champion-eval")
def champion_eval_flow(project_dir: str = ".", params_path: str = "params.yaml",
                       sts_path: str = "data/prepared/sts.parquet", heartbeat_s: float = EVERY_S) -> dict:
    """Evaluate ``models:/sts-regression@champion`` on the prepared test sets with the release flow's evaluate task
    (one MLflow run in experiment ``stsreg-champion``); tags on the version. The flow-run log says every
    ``heartbeat_s`` seconds that the evaluation still runs."""
    from pipelines.product.release_flow import Recorded, evaluate_task
    project = Path(project_dir).resolve()
    uri = tracking.tracking_uri(project)  # passed down explicitly: no process-wide MLflow state is set
    c = tracking.client(uri)
    version = c.get_model_version_by_alias(MODEL_NAME, "champion")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = registry.model_folder(version, uri, tmp)
        with heartbeat(get_run_logger(), f"evaluating champion v{version.version} on the test tables", heartbeat_s):
            recorded = Recorded(uri, "stsreg-champion", f"champion-v{version.version}",
                                {"model_version": version.version})
            metrics = evaluate_task(str(project / params_path), str(model_dir), str(project / sts_path),
                                    str(Path(tmp) / "eval"), recorded=recorded)
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
