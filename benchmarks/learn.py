"""``make bench-learn``: does the user's data make their model better, round by round? The default retrain (warm)
against a cold one, on a table that arrives in rounds (:data:`benchmarks.learn_data.TABLES`).

``--table qa`` (the default): the worked example's ``qa`` table (docs/own_data.md, 1,588 scored question/answer pairs)
arrives in rounds: a first part (``--first``, 40%) declared in a clone of this project and trained by hand (``dvc
repro promote``: champion v1), then ``--arrivals`` further parts (4). ``--table sick`` (``make bench-learn-sick``):
SICK-R's relatedness pairs as a table of the user's own, held out of the public training tables, its train pairs
arriving, scored on its official 4,927 test pairs (an interval a point wide). The clone is copied once round 1 is done,
so every kind (``--kinds``) starts from the same champion v1, data and registry: ``warm`` (params.yaml's defaults:
the pinned champion continued) and ``cold`` (``stage2.warm_start.enabled: false``: stage 2 from stage 1). Each
project runs the real loop: ``stsreg servers start``, ``stsreg deploy`` (the retrain deployment and its data
trigger), ``stsreg serve`` following ``@champion`` under a light load; per round ``stsreg data add arrival_N.jsonl
--table TABLE`` in each project in turn, the triggered retrain, its gate (the table's: ``promote.metrics: [TABLE]``
with ``promote.guards: {avg7: 0.3}``) and the served champion.

Per round and retrain kind it records the retrain report's clock (stage 2 and the whole loop), stage 2's steps and
kept step, the gate's verdict, the evaluation's avg7 unseen, and ``task_score``: the Spearman x100 (95% bootstrap CI)
of the retrain's model on the table's **fixed test pairs** (never trained on); the served champion's score beside it.
Writes ``reports/benchmarks-learn[-TABLE].{md,json,png}`` (:mod:`benchmarks.learn_report`).

    python -m benchmarks.learn [--table qa|sick] [--kinds warm,cold] [--arrivals 4] [-S stage2.epochs=1 ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks.loop import STSREG, _env, _has_champion, _last_run, _sh
from benchmarks.loop_load import Load
from benchmarks.learn_data import TABLES, LearnTable, arrival_files
from benchmarks.loop_project import make_project
from benchmarks.serve_rows import free_port
from stsreg.infra.local_servers import wait_healthy

REPO = Path(__file__).resolve().parents[1]
#: The retrain kinds: the default (warm: from the pinned champion) and a cold one (stage 2 from stage 1).
KINDS = {"warm": {}, "cold": {"stage2.warm_start.enabled": False}}


def _set_params(project: Path, values: dict, message: str) -> None:
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    for dotted, value in values.items():
        *keys, last = dotted.split(".")
        node = params
        for k in keys:
            node = node.setdefault(k, {})
        node[last] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    _sh(["git", "commit", "-qam", message], project)


def projects(base: Path, table: LearnTable, kinds: list[str], overrides: list[str], first: float, n: int
             ) -> tuple[dict[str, Path], list[Path]]:
    """A project per retrain kind after round 1 (``warm``: the defaults; ``cold``: a copy with the warm start off),
    and the arrival files (made once; a rerun continues)."""
    warm = base / "warm"
    if not (warm / "params.yaml").exists():
        make_project(REPO, warm, overrides)
        table.arrivals(base, warm, first, n)
        _sh(["git", "add", "-A"], warm)
        _sh(["git", "commit", "-qam", f"the first {first:.0%} of the {table.name} table"], warm)
    files = arrival_files(base)
    if not _has_champion(warm):
        print(f"round 1 by hand in {warm}: dvc repro promote", flush=True)
        _sh(["dvc", "repro", "promote"], warm)
    if not _has_champion(warm):  # the gate against the untouched backbone kept v1: both kinds still start from it
        decision = _json(warm / "reports/registry/promotion.json")
        _sh([STSREG, "champion", "set", str(decision["challenger"]), "--reason",
             "make bench-learn: round 1's version is the champion both retrain kinds start from (the gate against the "
             f"untouched backbone kept it: {decision.get('reason', '')[:300]})"], warm)
    found = {}
    for kind in kinds:  # the same champion v1, data and registry for every kind
        project = found[kind] = base / kind
        if not (project / "params.yaml").exists():
            shutil.copytree(warm, project, symlinks=True)
        wanted = {**table.gate, **KINDS[kind]}
        if any(_param(project, key) != value for key, value in wanted.items()):
            _set_params(project, wanted, f"{kind} retrains, gated on {table.name}")
    return found, files


def _param(project: Path, dotted: str):
    node = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    for key in dotted.split("."):
        node = (node or {}).get(key)
    return node


class Served:
    """One project's loop machinery: its servers, the retrain deployment, ``stsreg serve`` and the light load."""

    def __init__(self, project: Path, rps: float):
        self.project, self.rps = project, rps
        self.server = self.load = None

    def __enter__(self):
        prefect, mlflow_port, self.port = free_port(), free_port(), free_port()
        _sh([STSREG, "servers", "start", "--prefect-port", str(prefect), "--mlflow-port", str(mlflow_port)],
            self.project)
        _sh([STSREG, "deploy"], self.project)
        log = self.project / ".stsreg/logs/bench-learn-serve.log"
        self.server = subprocess.Popen([STSREG, "serve", "--model-uri", "models:/sts-regression@champion", "--port",
                                        str(self.port), "--follow-s", "2"], cwd=self.project, env=_env(self.project),
                                       stdout=open(log, "w"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{self.port}"
        wait_healthy(f"{url}/ready", lambda: self.server.poll() is None, "stsreg serve", log, 900)
        self.load = Load(url, self.rps).__enter__()
        return self

    def __exit__(self, *exc):
        if self.load:
            self.load.__exit__(None, None, None)
        if self.server:
            self.server.send_signal(signal.SIGTERM)
            self.server.wait(60)
        _sh([STSREG, "servers", "stop"], self.project)


def task_scores(model_dir: Path, pairs: pd.DataFrame, max_length: int) -> np.ndarray:
    """The cosine of every fixed test pair under the model folder (fp32, the evaluation's length)."""
    from stsreg.product.runners.eval_runner import load_for_eval
    from stsreg.product.sts_eval import cosine_scores

    model = load_for_eval(model_dir, max_length, "mean", "fp32")
    return cosine_scores(model, pairs.sentence1.tolist(), pairs.sentence2.tolist(), 64, show_progress=False)


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def one_round(kind: str, served: Served, arrival: Path, rnd: int, pairs: pd.DataFrame, table: str,
              timeout_s: float) -> dict:
    """``stsreg data add`` of ``arrival`` to ``table`` in the project, the triggered retrain, the served champion; the
    row."""
    project = served.project
    began = time.time()
    _sh([STSREG, "data", "add", str(arrival), "--table", table], project)
    report = _last_run(project, began, timeout_s)
    if report.get("promoted"):
        served.load.wait_for(str(report["after"]["champion"]), 600)
    return row_of(kind, project, rnd, pairs, report, began, served.load.summary(), table)


def row_of(kind: str, project: Path, rnd: int, pairs: pd.DataFrame, report: dict, began: float,
           load: dict | None, table: str = "qa") -> dict:
    """A round's row from the project's files after its retrain (``report``: its ``reports/retrain/last_run.json``;
    ``load``: what the light load saw, None when nobody watched)."""
    summary = _json(project / "models/stage2/training_summary.json")
    phases = {p["phase"]: p["seconds"] for p in (report.get("clock") or {}).get("phases", [])}
    evaluated = "evaluate" in report.get("ran", [])
    metrics = _json(project / "reports/eval/metrics.json") if evaluated else {}
    promotion = _json(project / "reports/registry/promotion.json") if "promote" in report.get("ran", []) else {}
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    cosines = task_scores(project / "models/stage2", pairs, params["evaluate"]["max_length"])
    return {"round": rnd, "retrain": kind, "rows_added": (report.get("tables_changed") or {}).get(table, {}).get(
                "added"),
            "stage2_s": phases.get("stage2"), "clock_s": (report.get("clock") or {}).get("total_s"),
            "steps": summary.get("steps"), "kept_step": summary.get("best_step"),
            "dev_start": summary.get("start_dev_spearman"), "dev_kept": summary.get("best_dev_spearman"),
            "started_from": summary.get("started_from"), "nothing_learned": report.get("nothing_learned"),
            "avg7_unseen": metrics.get("avg7_unseen_spearman"), "promoted": bool(report.get("promoted")),
            "gate": {"reason": promotion.get("reason"), "tests": promotion.get("tests"),
                     "guards": promotion.get("guards")} if promotion else None,
            "champion": report["after"]["champion"], "version": report["after"]["latest"],
            "precision": summary.get("precision"), "settings": {"stage2": summary.get("config", {}).get("stage2"),
                                                               "promote": params["promote"]},
            "load": load, "cosines": cosines.tolist(), "added_at": began}


def round_one(project: Path, pairs: pd.DataFrame) -> dict:
    """Round 1 (the first part, by hand): the champion v1 both kinds start from (promoted by its gate, or set by
    hand where the gate kept it: :func:`benchmarks.learn_report.first_champion`), scored on the fixed pairs."""
    summary = _json(project / "models/stage2/training_summary.json")
    metrics = _json(project / "reports/eval/metrics.json")
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    cosines = task_scores(project / "models/stage2", pairs, params["evaluate"]["max_length"])
    return {"round": 1, "retrain": "first", "rows_added": None, "steps": summary.get("steps"),
            "kept_step": summary.get("best_step"), "avg7_unseen": metrics.get("avg7_unseen_spearman"),
            "promoted": bool(_json(project / "reports/registry/promotion.json").get("promoted")), "champion": 1,
            "version": 1, "precision": summary.get("precision"),
            "cosines": cosines.tolist()}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.learn_report import write

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", choices=sorted(TABLES), default="qa",
                    help="the table that arrives (benchmarks.learn_data.TABLES): qa, the worked example's; sick, "
                         "SICK-R's relatedness pairs as a table of yours")
    ap.add_argument("--kinds", default="warm,cold", help="the retrain kinds, comma-separated: warm (the default "
                                                         "configuration) and cold (the warm start off)")
    ap.add_argument("--dir", type=Path, help="where the projects go (default build/bench-learn, -TABLE for another "
                                             "table)")
    ap.add_argument("-S", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a params override of every project (e.g. stage2.epochs=1), written into the report")
    ap.add_argument("--first", type=float, default=0.4, help="the fraction of the table's train rows declared in "
                                                            "round 1")
    ap.add_argument("--arrivals", type=int, default=4, help="the rounds of rows that arrive after the first")
    ap.add_argument("--rps", type=float, default=1.0, help="the light load on each project's server")
    ap.add_argument("--timeout-s", type=float, default=3 * 3600, help="the longest one retrain may take")
    ap.add_argument("--out", help="report path without extension (default reports/benchmarks-learn, -TABLE for "
                                  "another table)")
    a = ap.parse_args(argv)
    table, kinds = TABLES[a.table], [k for k in a.kinds.split(",") if k]
    if not kinds or set(kinds) - set(KINDS) or kinds[0] != "warm":
        ap.error(f"--kinds: warm first, then any of {sorted(KINDS)}")
    suffix = "" if a.table == "qa" else f"-{a.table}"
    a.dir = a.dir or REPO / f"build/bench-learn{suffix}"
    a.out = a.out or str(REPO / f"reports/benchmarks-learn{suffix}")
    a.dir.mkdir(parents=True, exist_ok=True)
    found, files = projects(a.dir, table, kinds, a.overrides, a.first, a.arrivals)
    pairs = table.test_pairs(a.dir)
    state = a.dir / "rounds.json"  # every finished round, so that a rerun continues where this one stopped
    rows = _json(state).get("rows") or [round_one(found["warm"], pairs)]
    about = {"overrides": a.overrides, "split": {"first": a.first, "arrivals": a.arrivals}, "table": a.table,
             "kinds": kinds}
    with ExitStack() as stack:
        served = {kind: stack.enter_context(Served(project, a.rps)) for kind, project in found.items()}
        for rnd, arrival in enumerate(files, start=2):
            for kind in kinds:
                if any(r["round"] == rnd and r["retrain"] == kind for r in rows):
                    continue
                print(f"round {rnd}: {kind} retrain on {arrival.name}", flush=True)
                rows.append(one_round(kind, served[kind], arrival, rnd, pairs, table.name, a.timeout_s))
                state.write_text(json.dumps({"rows": rows, **about}))
    print(write(rows, pairs, found, table, about, Path(a.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
