"""Running the project as a service: ``stsreg servers``, ``postgres`` and ``deploy``, each verb's parser beside its
handler."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from stsreg.commands import add_params
from stsreg.infra.config import load_params
from stsreg.infra.mlflow_ui import runs_page
from stsreg.infra.postgres import DatabaseError, LocalPostgres
from stsreg.infra import local_servers


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
    sv.add_argument("--database", default=os.environ.get("STSREG_DATABASE") or None, metavar="URL",
                    help="postgresql://USER[:PASSWORD]@HOST[:PORT]/DB: both servers keep their state on that "
                         "PostgreSQL server, in databases DB_mlflow and DB_prefect (created when missing; MLflow's "
                         "schema migrated); `stsreg postgres start` prints one. Default: $STSREG_DATABASE, else the "
                         "embedded SQLite stores")
    sv.add_argument("--artifacts", default=None, metavar="DIR",
                    help="the folder MLflow's server keeps artifacts in, on this host; clients read and write them "
                         "through the server (mlflow-artifacts:/). Default: <project>/mlflow/artifacts")
    sv.set_defaults(func=cmd_servers)


def cmd_servers(args: argparse.Namespace) -> int:
    project = Path(args.project)
    if args.action == "start":
        try:
            urls = local_servers.start(project, args.prefect_port, args.mlflow_port, worker=not args.no_worker,
                                       timeout=args.timeout, host=args.host,
                                       prefect_toml=not args.no_prefect_toml,
                                       stores=local_servers.Stores(args.database, args.artifacts))
        except RuntimeError as exc:
            print(f"servers failed to start: {exc}", file=sys.stderr)
            return 1
        logs = local_servers.Layout(project.resolve()).state / "logs"
        profile = ("prefect.toml written here: `prefect ...` commands typed in this project use this server (other "
                   "projects are not touched; `stsreg servers stop` removes it)" if urls.get("prefect_toml") else
                   f"no prefect.toml written: export PREFECT_API_URL={urls['prefect_api']} for `prefect ...`")
        print(f"Prefect UI   {urls['prefect']}   (API {urls['prefect_api']})\nMLflow UI    "
              f"{runs_page(urls['mlflow'])}\nworker       pool {local_servers.POOL}: "
              f"{'running' if not args.no_worker else 'not started'}\n"
              f"database     {urls['database']}\n{profile}\nfor `mlflow ...` commands: export "
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


def postgres(sub, name: str) -> None:
    pg = sub.add_parser(name, help="start/stop/status/url of a local PostgreSQL for the servers' stores",
                        description="A PostgreSQL server from this machine's package (Debian: apt-get install "
                                    "postgresql), made with initdb on first start (role stsreg, a generated password, "
                                    "password logins over TCP) and run with pg_ctl. start prints the URL to give "
                                    "`stsreg servers start --database`; url prints it again.")
    pg.add_argument("action", choices=["start", "stop", "status", "url"], help="what to do")
    pg.add_argument("--project", default=".", help="project folder (the default --dir is under it)")
    pg.add_argument("--dir", default=None, help="the server's folder (cluster, password, log). Default: "
                                                "<project>/.stsreg/postgres; as root /var/lib/postgresql/stsreg/"
                                                "<project>-<hash> (PostgreSQL runs as the postgres user there)")
    pg.add_argument("--host", default=None, help="listen address (start; default: the folder's last, else 127.0.0.1)")
    pg.add_argument("--port", type=int, default=None, help="listen port (start; default: the folder's last, else "
                                                           "5432)")
    pg.set_defaults(func=cmd_postgres)


def cmd_postgres(args: argparse.Namespace) -> int:
    folder = Path(args.dir).resolve() if args.dir else LocalPostgres.default_folder(Path(args.project))
    try:
        if args.action == "start":
            last = LocalPostgres.at(folder) if (folder / "address").exists() else LocalPostgres(folder)
            server = LocalPostgres(folder, args.host or last.host, args.port or last.port)
            if server != last and last.running():
                raise DatabaseError(f"already running on {last.host}:{last.port}: `stsreg postgres stop` first to "
                                    f"move it to {server.host}:{server.port}")
            url = server.start()
            print(f"PostgreSQL   {server.host}:{server.port}   (folder {folder}, log {server.log})\n"
                  f"{url}\nstart the servers on it: stsreg servers start --database '{url}'")
        elif args.action == "url":
            print(LocalPostgres.at(folder).url())
        elif args.action == "stop":
            stopped = (folder / "address").exists() and LocalPostgres.at(folder).stop()
            print("stopped: " + ("postgres" if stopped else "nothing was running"))
        else:
            running = (folder / "address").exists() and LocalPostgres.at(folder).running()
            print(json.dumps({"folder": str(folder), "running": bool(running)}, indent=2))
            return 0 if running else 3
    except DatabaseError as exc:
        print(f"stsreg postgres {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


def worker(sub, name: str) -> None:
    wk = sub.add_parser(name, help="run a Prefect process worker for a pool (e.g. a GPU host's stage-2 pool) against "
                                   "a Prefect server, after checking that its API answers",
                        description="Checks the Prefect API (--api, default $PREFECT_API_URL) answers within "
                                    "seconds, then runs `prefect worker start --pool POOL --type process` in this "
                                    "process with the flow-run heartbeats the Crashed-run automation watches. An API "
                                    "that does not answer is one line and exit 1 (Prefect's own worker retries "
                                    "for ever).")
    wk.add_argument("--pool", required=True, help="the work pool (schedule.gpu_pool for stage 2)")
    wk.add_argument("--api", default=os.environ.get("PREFECT_API_URL") or None,
                    help="the Prefect server's API URL (http://HOST:4200/api); default $PREFECT_API_URL")
    wk.add_argument("--check-timeout", type=float, default=10.0, help="seconds the API may take to answer")
    wk.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    if not args.api:
        print("stsreg worker: no Prefect API: give --api http://HOST:4200/api (or set PREFECT_API_URL)",
              file=sys.stderr)
        return 2
    api = args.api.rstrip("/")
    deadline = time.monotonic() + args.check_timeout
    while not local_servers.healthy(api + "/health", timeout=2.0):
        if time.monotonic() >= deadline:
            print(f"stsreg worker: the Prefect API {api} did not answer its health check within "
                  f"{args.check_timeout:.0f} s (server down, wrong URL, or a host this one cannot reach)",
                  file=sys.stderr)
            return 1
        time.sleep(0.5)
    env = {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(local_servers.HEARTBEAT_S), **os.environ, "PREFECT_API_URL": api}
    prefect = local_servers.venv_bin("prefect")
    sys.stdout.flush()
    os.execvpe(prefect, [prefect, "worker", "start", "--pool", args.pool, "--type", "process"], env)


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
