"""Stage 2 on its own work pool (a GPU machine), the rest of the pipeline where it runs.

Two halves, both Prefect:

- :func:`stage2_remote_flow` runs on a worker of ``schedule.gpu_pool`` (deployment ``stsreg-stage2-remote/gpu``,
  created by ``stsreg deploy`` from the installed package: the worker image or venv). It clones ``repo_url`` at the
  parent's commit into ``$STSREG_WORKDIR`` (default: the system temp folder), writes the parent's ``params.yaml``,
  ``dvc.lock`` and ``champion.json``, pulls stage 2's inputs from the DVC remote, runs ``dvc repro --single-item
  stage2`` with that commit's code first on ``PYTHONPATH`` (so the stage runs the parent's code, not the image's),
  pushes ``models/stage2`` and logs to the shared MLflow server. It hands back the stage's ``dvc.lock`` entry and its
  small uncached outputs (``metrics/stage2.json``, the curves) as a Prefect artifact of its flow run (key
  ``stage2-handoff``).
- :func:`dispatch_stage2` runs in the parent (the retrain flow, on the CPU host): it refuses early what cannot work
  (no DVC remote, a local MLflow store, code not committed, no deployment, a pool without a worker), pushes stage 2's
  inputs, runs the deployment and waits, then writes the handoff and pulls ``models/stage2`` — after which
  ``dvc repro promote`` finds stage 2 up to date and evaluates, registers and promotes where it is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path

from prefect import flow, get_run_logger

from stsreg.infra.errors import InputError
from stsreg.product.serving.model_uri import answers
from stsreg.infra import atomic, tracking

DEPLOYMENT = "stsreg-stage2-remote/gpu"
HANDOFF_KEY = "stage2-handoff"
#: The small outputs of stage 2 that DVC does not cache (``cache: false``), so they travel in the handoff.
UNCACHED = ("metrics/stage2.json", "reports/stage2/dev_curve.csv", "reports/stage2/loss_curve.csv")
#: Stages whose outputs stage 2 reads: pushed by the parent, pulled by the worker.
INPUT_STAGES = ("prepare", "stage1")


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> str:
    """Run a command; its output goes to the flow log; raise with its tail when it fails."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    out = (proc.stdout + proc.stderr).strip()
    if out:
        get_run_logger().info("%s\n%s", " ".join(cmd), out[-4000:])
    if proc.returncode:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}) in {cwd}:\n{out[-3000:]}")
    return proc.stdout


def _lock_entry(lock_text: str, stage: str) -> dict:
    import yaml

    return yaml.safe_load(lock_text)["stages"][stage]


@flow(name="stsreg-stage2-remote", log_prints=True)
def stage2_remote_flow(repo_url: str, commit: str, files: dict[str, str], dvc_remote: str, mlflow_uri: str) -> dict:
    """Stage 2 of the parent's pipeline at ``commit``, on this worker; returns (and hands back) what the parent
    needs."""
    from prefect.artifacts import Artifact
    from prefect.runtime import flow_run

    root = Path(os.environ.get("STSREG_WORKDIR", tempfile.gettempdir())) / "stsreg-stage2"
    clone = root / f"{commit[:12]}-{flow_run.get_id() or 'local'}"
    root.mkdir(parents=True, exist_ok=True)
    _run(["git", "clone", "--quiet", "--no-checkout", repo_url, str(clone)], root)
    _run(["git", "checkout", "--quiet", commit], clone)
    for rel, text in files.items():  # the parent's params.yaml, dvc.lock (fresh stage 1, data), champion.json
        (clone / rel).write_text(text, encoding="utf-8")
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri, "STSREG_USE_SERVERS": "0",
           "PYTHONPATH": os.pathsep.join([str(clone / "src"), str(clone), os.environ.get("PYTHONPATH", "")])}
    _run(["dvc", "remote", "add", "--local", "--force", "--default", "stsreg-shared", dvc_remote], clone, env)
    _run(["dvc", "pull", *INPUT_STAGES], clone, env)
    _run(["dvc", "repro", "--single-item", "stage2"], clone, env)
    _run(["dvc", "push", "stage2"], clone, env)
    handoff = {"lock": _lock_entry((clone / "dvc.lock").read_text(), "stage2"), "host": socket.gethostname(),
               "clone": str(clone), "files": {rel: (clone / rel).read_text() for rel in UNCACHED
                                              if (clone / rel).exists()}}
    Artifact(type="stsreg-handoff", key=HANDOFF_KEY, description="stage 2's dvc.lock entry and uncached outputs",
             data=handoff).create()
    print(f"stage 2 trained in {clone} on {handoff['host']}; models/stage2 pushed to {dvc_remote}")
    return {k: handoff[k] for k in ("host", "clone")}


def _git(project: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def dvc_remote_url(project: Path) -> str:
    """The URL of the project's default DVC remote, or empty when none is set."""
    name = subprocess.run(["dvc", "remote", "default"], cwd=project, capture_output=True, text=True).stdout.strip()
    if not name:
        return ""
    # `dvc config` prints the bare value; `dvc remote list` is a table that wraps a long URL onto the next line
    return subprocess.run(["dvc", "config", f"remote.{name}.url"], cwd=project, capture_output=True,
                          text=True).stdout.strip()


def _prefect_checks(pool: str) -> None:
    """The deployment exists and ``pool`` has a worker online; else one :class:`InputError` saying what to do."""
    from prefect import get_client
    from prefect.client.schemas.objects import WorkerStatus
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def check():
        async with get_client() as client:
            try:
                deployment = await client.read_deployment_by_name(DEPLOYMENT)
            except ObjectNotFound:
                return f"no deployment {DEPLOYMENT} at {PREFECT_API_URL.value() or 'the ephemeral Prefect API'}: run " \
                       "`stsreg deploy` against the Prefect server (schedule.gpu_pool set)"
            if deployment.work_pool_name != pool:
                return f"deployment {DEPLOYMENT} runs on pool {deployment.work_pool_name!r}, params.yaml says " \
                       f"schedule.gpu_pool: {pool!r}: run `stsreg deploy` again"
            try:
                await client.read_work_pool(pool)
            except ObjectNotFound:
                return f"no work pool {pool!r} (schedule.gpu_pool): run `stsreg deploy`, then start a worker on it"
            workers = await client.read_workers_for_work_pool(pool)
            if not any(w.status == WorkerStatus.ONLINE for w in workers):
                return f"no worker is online in pool {pool!r}: on the GPU machine run `prefect worker start --pool " \
                       f"{pool} --type process` (or the worker image), with PREFECT_API_URL set"
            return ""

    problem = run_coro_as_sync(check())
    if problem:
        raise InputError(problem)


def preflight(project: Path, pool: str, repo_url: str) -> dict:
    """Everything a remote stage 2 needs, checked before anything is pushed or started."""
    repo = repo_url or _git(project, "remote", "get-url", "origin")
    if not repo:
        raise InputError("stage 2 on another machine clones the repository: set schedule.repo_url (or a git remote "
                         "`origin`) to a URL the GPU worker can reach")
    commit = _git(project, "rev-parse", "HEAD")
    dirty = _git(project, "status", "--porcelain", "--", "src", "pipelines", "dvc.yaml")
    if not commit or dirty:
        raise InputError(f"the GPU worker runs the code of a commit: commit (and push to {repo}) the changes to "
                         f"src/, pipelines/ or dvc.yaml first:\n{dirty}")
    remote = dvc_remote_url(project)
    if not remote:
        raise InputError("stage 2 on another machine exchanges data through a DVC remote, and none is set: "
                         "`dvc remote add -d shared <url>` (a folder, s3://, gs://, ssh://)")
    uri = tracking.tracking_uri(project)
    if not uri.startswith(("http://", "https://")):
        raise InputError(f"stage 2 on another machine logs to a shared MLflow server, but the store is {uri}: "
                         "`make servers` (or MLFLOW_TRACKING_URI=http://...)")
    if not answers(uri):
        raise InputError(f"the MLflow tracking server {uri} does not answer")
    _prefect_checks(pool)
    return {"repo_url": repo, "commit": commit, "dvc_remote": remote, "mlflow_uri": uri}


def _read_handoff(flow_run_id) -> dict:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, FlowRunFilterId
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def read():
        async with get_client() as client:
            return await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[HANDOFF_KEY])),
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            )

    (artifact,) = run_coro_as_sync(read())
    data = artifact.data
    return json.loads(data) if isinstance(data, str) else data


def apply_handoff(project: Path, handoff: dict) -> None:
    """Write the worker's stage-2 lock entry and uncached outputs into ``project``, then pull ``models/stage2``."""
    import yaml


    lock_path = project / "dvc.lock"
    lock = yaml.safe_load(lock_path.read_text())
    lock["stages"]["stage2"] = handoff["lock"]
    atomic.write_text(lock_path, yaml.safe_dump(lock, sort_keys=False))
    for rel, text in handoff["files"].items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(project / rel, text)
    _run(["dvc", "pull", "stage2"], project)


def dispatch_stage2(project: Path, pool: str, repo_url: str = "", timeout_s: float = 6 * 3600) -> dict:
    """Stage 2 of ``project`` on a worker of ``pool``; when it returns, ``models/stage2`` and its lock entry are
    here."""
    from prefect.deployments import run_deployment

    info = preflight(project, pool, repo_url)
    _run(["dvc", "push", *INPUT_STAGES], project)
    # the parent's params, lock and champion pin (what a warm stage 2 continues): written into the worker's clone
    files = {rel: (project / rel).read_text() for rel in ("params.yaml", "dvc.lock", "champion.json")
             if (project / rel).exists()}
    run = run_deployment(DEPLOYMENT, parameters={**{k: info[k]
                                                    for k in ("repo_url", "commit", "dvc_remote", "mlflow_uri")},
                                                 "files": files}, timeout=timeout_s)
    if not run.state.is_completed():
        raise RuntimeError(f"stage 2 on pool {pool!r} (flow run {run.id}) ended {run.state.type.value}: "
                           f"{run.state.message or 'see the flow run in the Prefect UI'}")
    handoff = _read_handoff(run.id)
    apply_handoff(project, handoff)
    return {"flow_run_id": str(run.id), "pool": pool, "host": handoff["host"], "clone": handoff["clone"],
            "commit": info["commit"]}
