"""Running the project as a service: ``stsreg servers`` and ``deploy``, each verb's parser beside its handler."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from stsreg.commands import add_params
from stsreg.infra.config import load_params


def servers(sub, name: str) -> None:
    sv = sub.add_parser(name, help="start/stop/status of the local Prefect + MLflow servers and UIs (and a worker)",
                        description="start: Prefect server + UI, MLflow tracking server + UI (both on 127.0.0.1, state "
                                    "under the project) and a process worker for pool stsreg-process; prints the URLs. "
                                    "While they run, stsreg commands log to them. stop: stops all three.")
    sv.add_argument("action", choices=["start", "stop", "status"], help="what to do")
    sv.add_argument("--project", default=".", help="project folder (state goes to <project>/.stsreg and "
                                                   "<project>/mlflow)")
    sv.add_argument("--prefect-port", type=int, default=4200, help="Prefect server and UI")
    sv.add_argument("--mlflow-port", type=int, default=5000, help="MLflow server and UI")
    sv.add_argument("--no-worker", action="store_true", help="do not start the process worker")
    sv.add_argument("--host", default="127.0.0.1", help="listen address; 0.0.0.0 for workers on other machines")
    sv.add_argument("--timeout", type=float, default=180.0, help="seconds each server may take to answer its health "
                                                                 "check before the start is abandoned (and stopped)")
    sv.add_argument("--no-prefect-toml", action="store_true",
                    help="do not write the project's prefect.toml (the `prefect` command typed here then needs "
                         "PREFECT_API_URL)")
    sv.set_defaults(func=cmd_servers)


def cmd_servers(args: argparse.Namespace) -> int:
    from stsreg.infra import local_servers
    from stsreg.infra.mlflow_ui import runs_page

    project = Path(args.project)
    if args.action == "start":
        try:
            urls = local_servers.start(project, args.prefect_port, args.mlflow_port, worker=not args.no_worker,
                                       timeout=args.timeout, host=args.host,
                                       prefect_toml=not args.no_prefect_toml)
        except RuntimeError as exc:
            print(f"servers failed to start: {exc}", file=sys.stderr)
            return 1
        logs = local_servers.Layout(project.resolve()).state / "logs"
        profile = ("prefect.toml written here: `prefect ...` commands typed in this project use this server (other "
                   "projects are not touched; `stsreg servers stop` removes it)" if urls.get("prefect_toml") else
                   f"no prefect.toml written: export PREFECT_API_URL={urls['prefect_api']} for `prefect ...`")
        print(f"Prefect UI   {urls['prefect']}   (API {urls['prefect_api']})\nMLflow UI    "
              f"{runs_page(urls['mlflow'])}\nworker       pool {local_servers.POOL}: "
              f"{'running' if not args.no_worker else 'not started'}\n{profile}\nfor `mlflow ...` commands: export "
              f"MLFLOW_TRACKING_URI={urls['mlflow']}\nstsreg commands now use these servers; logs in {logs}; `stsreg "
              "servers stop` stops them")
    elif args.action == "stop":
        stopped = local_servers.stop(project)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        st = local_servers.status(project)
        print(json.dumps(st, indent=2))
        return 0 if st.get("running") else 3
    return 0


def deploy(sub, name: str) -> None:
    dp = sub.add_parser(name, help="create the Prefect deployments (weekly retrain, daily champion eval, manual "
                                   "profile)",
                        description="Deploy the flows of pipelines/product/ops_flow.py from this project folder, with "
                                    "the cron schedules of params.yaml's `schedule` section, to a work pool.")
    add_params(dp)
    dp.add_argument("--project", default=".", help="the project folder the deployments run in")
    dp.add_argument("--pool", default=None, help="work pool (default: schedule.work_pool; created if it is a new "
                                                 "process pool)")
    dp.add_argument("--image", default=None, help="docker pool: the job image (e.g. stsreg-worker:latest)")
    dp.set_defaults(func=cmd_deploy)


def cmd_deploy(args: argparse.Namespace) -> int:
    from prefect.settings import PREFECT_API_URL

    from pipelines.product.deploy import deploy

    api = PREFECT_API_URL.value()  # the environment, else the active Prefect profile (`make servers` writes one)
    if not api:
        print("no Prefect server: run `make servers` first (or set PREFECT_API_URL)", file=sys.stderr)
        return 2
    schedule = load_params(args.params).schedule
    for name in deploy(Path(args.project), schedule, args.pool, args.image):
        print(f"deployed {name} on pool {args.pool or schedule.work_pool}")
    print(f"see them at {api.removesuffix('/api')}/deployments; run one: prefect deployment run stsreg-retrain/weekly")
    return 0
