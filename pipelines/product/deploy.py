"""Prefect deployments of the operation flows (:mod:`pipelines.product.ops_flow`), schedules from ``params.yaml``.

    stsreg deploy                                  # to the running Prefect server (stsreg servers start)
    stsreg deploy --pool stsreg-gpu                # a process pool served by the GPU worker image
    stsreg deploy --pool stsreg-docker --image stsreg-worker:latest   # a docker pool running that image

The deployments, their flows and schedules:

- ``stsreg-retrain/weekly``: retrain + promote, on ``schedule.retrain_cron`` and each ``stsreg.data.changed`` event of
  the project;
- ``stsreg-champion-eval/daily``: evaluate the champion, on ``schedule.champion_eval_cron``;
- ``stsreg-profile-run/manual``: ``dvc repro profile``, no schedule (run it from the UI/CLI);
- ``stsreg-encode-chunks/pool``: chunks of a corpus, no schedule (``stsreg-encode`` starts its runs).

The code is taken from the project folder itself (``flow.from_source(<project>)``): a process worker runs the
flows in that folder, so the DVC pipeline, params and MLflow store are the project's. The retrain deployment has
a concurrency limit of 1 (overlapping triggers queue); the flows also hold the project's pipeline lock. A flow run
whose heartbeats stop (its worker killed, the machine rebooted) is marked Crashed by an automation
(:func:`ensure_zombie_automation`), so it never holds that one slot for ever.

With ``schedule.gpu_pool`` set, a fourth deployment, ``stsreg-stage2-remote/gpu`` (:mod:`pipelines.product.gpu_stage2`),
goes to that pool: its flow is imported from the worker's installed package (the worker image or a venv, never a host
path) and clones the project at the retrain's commit itself.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pipelines.product.data_events import retrain_trigger
from stsreg.infra.config import ScheduleParams
from stsreg.infra.local_servers import HEARTBEAT_S

DEPLOYMENTS = (
    # (flow name, deployment name, entrypoint, params cron field or None)
    ("stsreg-retrain", "weekly", "pipelines/product/ops_flow.py:retrain_flow", "retrain_cron"),
    ("stsreg-champion-eval", "daily", "pipelines/product/ops_flow.py:champion_eval_flow", "champion_eval_cron"),
    ("stsreg-profile-run", "manual", "pipelines/product/ops_flow.py:profile_run_flow", None),
    # the workers of `stsreg-encode` (pipelines/product/encode_flow.py): started by that flow, one run per chunk group
    ("stsreg-encode-chunks", "pool", "pipelines/product/encode_flow.py:encode_chunks_flow", None),
)


def ensure_process_pool(name: str) -> None:
    """Create work pool ``name`` of type ``process`` unless it exists (other pool types: create them yourself)."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def go():
        async with get_client() as client:
            try:
                await client.read_work_pool(name)
            except ObjectNotFound:
                try:
                    await client.create_work_pool(WorkPoolCreate(name=name, type="process"))
                except ObjectAlreadyExists:
                    pass  # created between the read and the create (a worker starting on the same pool)

    run_coro_as_sync(go())


def deploy(project: Path, schedule: ScheduleParams, pool: str | None = None, image: str | None = None) -> list[str]:
    """Create/update the three deployments; returns their ``flow/deployment`` names."""
    from prefect import Flow
    from prefect.client.schemas.schedules import CronSchedule

    project = project.resolve()
    pool = pool or schedule.work_pool
    if image is None:
        ensure_process_pool(pool)
    names = []
    for flow_name, name, entrypoint, cron_field in DEPLOYMENTS:
        cron = getattr(schedule, cron_field) if cron_field else ""
        schedules = [CronSchedule(cron=cron, timezone=schedule.timezone)] if cron else []
        # docker pool: the image holds the code; the project folder is mounted at /work
        project_dir = "/work" if image else str(project)
        job_variables = {"image": image, "volumes": [f"{project}:/work"]} if image else {}
        source = Flow.from_source(source=str(project), entrypoint=entrypoint)
        # the retrain also starts when labelled data is added (stsreg data add emits the event), not only weekly
        triggers = [retrain_trigger(project)] if flow_name == "stsreg-retrain" and not image else None
        source.deploy(name=name, work_pool_name=pool, image=image, build=False, push=False, schedules=schedules,
                      concurrency_limit=1 if flow_name == "stsreg-retrain" else None,
                      parameters={"project_dir": project_dir},
                      job_variables=job_variables, tags=["stsreg"], print_next_steps=False, ignore_warnings=True,
                      triggers=triggers,
                      description=(source.description or "").strip().split("\n")[0])
        names.append(f"{flow_name}/{name}")
    if schedule.gpu_pool:
        names.append(deploy_gpu_stage2(schedule.gpu_pool, image))
    ensure_zombie_automation()
    return names


#: The automation that marks a flow run Crashed when its heartbeats stop (its process, worker or machine died).
ZOMBIES = "stsreg: crash flow runs whose heartbeats stopped"


def ensure_zombie_automation(heartbeat_s: int = HEARTBEAT_S) -> str:
    """Create (once) Prefect's zombie-run automation: a flow run that has sent a heartbeat
    (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, which ``stsreg servers start`` gives its worker) and then neither another
    nor a final state within three heartbeats is marked Crashed. A retrain killed with its worker (kill -9, a reboot)
    used to stay Running for ever and, the retrain deployment's concurrency limit being 1, hold every later retrain
    in Scheduled. Returns the automation's name."""
    from prefect.automations import Automation
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    with get_client(sync_client=True) as client:
        if client.read_automations_by_name(ZOMBIES):
            return ZOMBIES
    Automation(name=ZOMBIES, trigger=EventTrigger(
        after={"prefect.flow-run.heartbeat"},
        expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
        match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}), for_each={"prefect.resource.id"},
        posture=Posture.Proactive, threshold=1, within=timedelta(seconds=3 * heartbeat_s)),
        actions=[ChangeFlowRunState(state=StateType.CRASHED, message=f"no heartbeat for {3 * heartbeat_s} s: its "
                                                                     "process, worker or machine died")]).create()
    return ZOMBIES


def deploy_gpu_stage2(pool: str, image: str | None = None) -> str:
    """The stage-2 deployment on ``pool`` (a process pool is created if missing; a docker pool runs ``image`` and
    requests every GPU of its host)."""
    from prefect import deploy
    from prefect.deployments.runner import EntrypointType

    from pipelines.product.gpu_stage2 import DEPLOYMENT, stage2_remote_flow

    if image is None:
        ensure_process_pool(pool)
    # prefect-docker passes container_create_kwargs to docker-py: device_requests = `docker run --gpus all`
    gpus = {"device_requests": [{"count": -1, "capabilities": [["gpu"]]}]}
    job_variables = {"image": image, "container_create_kwargs": gpus} if image else {}
    deployment = stage2_remote_flow.to_deployment(name=DEPLOYMENT.split("/")[1],
                                                  entrypoint_type=EntrypointType.MODULE_PATH,
                                                  tags=["stsreg"], job_variables=job_variables,
                                                  description="stage 2 of a retrain, on a GPU worker")
    deploy(deployment, work_pool_name=pool, image=image, build=False, push=False, print_next_steps_message=False,
           ignore_warnings=True)
    return DEPLOYMENT
