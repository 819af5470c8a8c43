"""Search flow: an Optuna study over stage 2, scored on STS-B dev only, then its report.

One MLflow parent run ``search`` (experiment ``stsreg-search``) per study, one child run per trial (its stage-2
settings, dev curve and loss curve). The study is kept in ``reports/search/study.db``: a rerun continues it (trials
in all: ``search.trials``; new trials start only within ``search.minutes`` of one invocation), and a trial killed
mid-way is retried from its last checkpoint.

    stsreg search                       # or: dvc repro search / make search
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path

from prefect import flow, task

from stsreg.infra import atomic, runtime, tracking
from stsreg.experiments import search
from stsreg.infra.codehash import code_hash
from stsreg.infra.config import load_params
from stsreg.infra.hashing import sha256_file, sha256_lines
from stsreg.product.runners.stage2_runner import run_stage2
from stsreg.product.runners.start import Start
from stsreg.product.model import SiameseRegressor

EXPERIMENT = "stsreg-search"
log = logging.getLogger(__name__)


def _dir_hash(folder: Path) -> str:
    """sha256 over the files of a model folder (names and bytes), for the study's name."""
    parts = [f"{p.relative_to(folder)}:{sha256_file(p)}" for p in sorted(folder.rglob("*")) if p.is_file()]
    return sha256_lines(parts)


def _open_study(name: str, db_path: str, s, seed: int):
    """The study ``name`` in the SQLite file ``db_path`` (created or continued), ready to run: interrupted trials
    queued again, the points of ``search.enqueue`` queued once per study."""
    import optuna
    from optuna.trial import TrialState

    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    storage = optuna.storages.RDBStorage(f"sqlite:///{Path(db_path).resolve()}")
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True,
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=s.startup_trials,
                                                                   n_warmup_steps=s.prune_after))
    # seeded by how far the study has got: a continued study draws new start-up points instead of replaying them
    study.sampler = optuna.samplers.TPESampler(seed=seed + len(study.trials))
    # A trial still RUNNING was killed with its process (the pipeline lock rules out a live one): mark it failed
    # and queue its settings again; the retry resumes from the trial folder's last checkpoint.
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
        log.info("trial %d was interrupted: queued again (resumes from its checkpoint)", t.number)
    # the points of search.enqueue run first, each once per study (a failed try is queued again)
    tried = [t.params or t.system_attrs.get("fixed_params", {})  # a WAITING trial holds its point as fixed_params
             for t in study.get_trials(deepcopy=False) if t.state != TrialState.FAIL]
    for point in s.enqueue:
        wanted = search.point_params(point)
        if wanted not in tried:
            study.enqueue_trial(wanted, user_attrs={"enqueued": True})
            tried.append(wanted)
    return study


def _parent_run(study, params, name: str) -> str:
    """The MLflow run every trial of ``study`` nests under: created with the study, its id kept in the study."""
    parent = study.user_attrs.get("mlflow_parent_run")
    if parent is None:
        s = params.search
        logged = {"search": dataclasses.asdict(s), "stage2": {f: getattr(params.stage2, f) for f in search.FIXED}}
        parent = tracking.start_run(EXPERIMENT, "search", logged, {**tracking.environment_tags(runtime.device_name()),
                                                                  "study": name})
        study.set_user_attr("mlflow_parent_run", parent)
    return parent


def _pruning_hook(study, trial):
    """``on_eval`` for a trial's stage 2: reports each dev evaluation after step 0 to Optuna and stops the trial
    (:class:`optuna.TrialPruned`) when the pruner says so; step 0, common to all trials, is kept once as
    ``start_dev``."""
    import optuna

    def on_eval(step: int, score: float) -> None:
        if step == 0:
            if "start_dev" not in study.user_attrs:
                study.set_user_attr("start_dev", score)
            return
        trial.report(score, step)
        if trial.should_prune():
            raise optuna.TrialPruned(f"dev {score:.2f} at step {step} is below the median of earlier trials")

    return on_eval


@task(name="search-study")
def run_study(params_path: str, sts_path: str, init_dir: str, work_dir: str, db_path: str) -> str:
    """Run (or continue) the study until it holds ``search.trials`` finished trials or ``search.minutes`` pass.
    Returns the study name."""
    import optuna
    from optuna.trial import TrialState


    params = load_params(params_path)
    s = params.search
    search.check_ranges(s, params_path)
    name = search.study_name(params, sha256_file(sts_path), _dir_hash(Path(init_dir)),
                             # config.py holds defaults and validation: a trial's settings are recorded in full
                             # (its params + the fixed settings in the name), so editing a default keeps the study
                             code_hash(("stsreg.experiments.search", "stsreg.product.runners.stage2_runner")))
    study = _open_study(name, db_path, s, params.seed)
    c = tracking.client()
    parent = _parent_run(study, params, name)

    def objective(trial) -> float:
        p2 = search.suggest(trial, s, params.stage2)
        p = dataclasses.replace(params, stage2=p2)
        work = Path(work_dir) / search.trial_key(p2)
        started = time.time()

        tags = {**tracking.environment_tags(runtime.device_name()), "mlflow.parentRunId": parent,
                "trial": str(trial.number), "study": name}
        pruned = None
        with tracking.tracked_run(EXPERIMENT, f"trial-{trial.number}", {"stage2": dataclasses.asdict(p2)}, tags) as run:
            try:
                start = Start(SiameseRegressor.load(init_dir, precision=params.model.precision), p)
                summary = run_stage2(start, Path(sts_path), work / "model", work / "ckpt", run,
                                     on_eval=_pruning_hook(study, trial))
            except optuna.TrialPruned as e:  # a decision, not a failure: the MLflow run ends FINISHED, tagged
                pruned = e
            trial.set_user_attr("minutes", (time.time() - started) / 60)
            c.set_tag(run.run_id, "state", "pruned" if pruned else "complete")
            if not pruned:
                trial.set_user_attr("best_step", summary["trained_best_step"])
                tracking.log_metrics(run.run_id, {"best_dev_spearman": summary["trained_best_dev_spearman"]})
        shutil.rmtree(work, ignore_errors=True)  # trials keep their dev curve (study + MLflow), not their weights
        if pruned:
            raise pruned
        return summary["trained_best_dev_spearman"]

    finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    remaining = s.trials - finished
    if remaining > 0:
        study.optimize(objective, n_trials=remaining, timeout=s.minutes * 60, gc_after_trial=True)
    else:
        log.info("study %s already holds %d finished trials (search.trials=%d)", name, finished, s.trials)
    return name


@task(name="search-report")
def search_report(db_path: str, study: str, out_dir: str, metrics_path: str) -> dict:
    import optuna

    st = optuna.load_study(study_name=study, storage=f"sqlite:///{Path(db_path).resolve()}")
    table = search.trials_table(st)
    complete = [t for t in st.trials if t.state.name == "COMPLETE"]
    best = None
    if complete:
        b = max(complete, key=lambda t: t.value)
        # a trial's params are its stage-2 values (suggest samples exactly these fields), in the report's order
        best = {"trial": b.number, "dev_spearman": b.value, "stage2": {k: b.params[k] for k in search.SEARCHED
                                                                       if k in b.params}}
    start_dev = st.user_attrs.get("start_dev")
    out = Path(out_dir)
    atomic.to_csv(table, out / "trials.csv")
    md = search.format_report(table, best, start_dev)
    atomic.write_text(out / "results.md", md + "\n")
    atomic.write_text(out / "best.json", json.dumps(best, indent=2))
    search.plot(st, out / "dev_by_trial.png", start_dev)
    summary = {"trials": len(st.trials), "complete": len(complete),
               "pruned": sum(t.state.name == "PRUNED" for t in st.trials),
               "start_dev_spearman": start_dev, "best_dev_spearman": best["dev_spearman"] if best else None,
               "minutes": float(table.minutes.fillna(0).sum())}
    atomic.write_text(metrics_path, json.dumps(summary, indent=2))  # last
    parent = st.user_attrs.get("mlflow_parent_run")
    if parent:
        tracking.log_report(parent, summary, out, ("results.md", "trials.csv", "best.json", "dev_by_trial.png"),
                            "search")
        tracking.client().set_terminated(parent)
    print(md)
    return summary


@flow(name="stsreg-search")
def search_flow(params_path: str = "params.yaml", sts_path: str = "data/prepared/sts.parquet",
                init_dir: str = "models/stage1", work_dir: str = "checkpoints/search",
                db_path: str = "reports/search/study.db", out_dir: str = "reports/search",
                metrics_path: str = "metrics/search.json") -> dict:
    study = run_study(params_path, sts_path, init_dir, work_dir, db_path)
    return search_report(db_path, study, out_dir, metrics_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run the stage-2 search as a Prefect flow.")
    ap.add_argument("--params", default="params.yaml")
    print(search_flow(params_path=ap.parse_args().params))
