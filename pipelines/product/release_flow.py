"""Release flows: evaluate the trained model, register it as ``challenger``, gate its promotion to ``champion``.

- ``stsreg-evaluate``: 7-task evaluation with bootstrap intervals, one MLflow run ("evaluate") with every
  metric, the table and the per-pair predictions; its run id goes to ``<out_dir>/mlflow_run.json``.
- ``stsreg-register``: logs the model as a pyfunc *in that evaluation run* (so a registry version links to
  its metrics and predictions), registers a version of ``sts-regression``, alias ``challenger``, with tags; the
  step itself is timed by its own MLflow run ("register").
- ``stsreg-promote``: the gate of :func:`stsreg.product.registry.promote`, in an MLflow run ("promote": wall time,
  ``promoted``, ``gain_diff`` / ``gain_low`` / ``gain_high`` / ``gain_p_value``); the decision goes to a JSON file too.
  With no champion yet, the challenger must beat the untouched backbone (``model.backbone``, evaluated then, in the
  run's ``precision``) by the same gate.

    python -m pipelines.product.release_flow evaluate|register|promote
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

from prefect import flow, task

from stsreg.infra import atomic, runtime, tracking
from stsreg.product import model_card, registry
from stsreg.infra.config import load_params
from stsreg.infra.errors import InputError
from stsreg.infra.public_tables import DEV_METRIC
from stsreg.product.lineage import log_tables
from stsreg.infra.hashing import fingerprint, sha256_file
from stsreg.product.runners import warm_start
from stsreg.product.runners.eval_runner import headline as eval_headline, load_for_eval, run_evaluate
from stsreg.product.sts_eval import score_pairs
from stsreg.product.model import resolve_backbone
from stsreg.product.serving import packaging

EXPERIMENT = "stsreg"
#: The gate's test figures a decision carries (``decision["test"]``): headline keys, and ``gain_*`` metrics of the run.
GAIN_KEYS = ("diff", "low", "high", "p_value")


def _run_tags(**extra: str) -> dict[str, str]:
    """The tags of every release run: library versions, device, git commit, CPU, then ``extra``."""
    return {**tracking.environment_tags(runtime.device_name()), **extra}


@dataclasses.dataclass(frozen=True)
class Recorded:
    """Where an evaluation's MLflow run goes: the store ``uri`` (None: :func:`tracking.tracking_uri`), the
    ``experiment``, the run ``name`` and its extra ``tags``."""

    uri: str | None = None
    experiment: str = EXPERIMENT
    name: str = "evaluate"
    tags: dict[str, str] = dataclasses.field(default_factory=dict)


@task(name="evaluate")
def evaluate_task(params_path: str, model_dir: str, sts_path: str, out_dir: str, headline_path: str | None = None,
                  recorded: Recorded = Recorded()) -> dict:
    """7-task evaluation of ``model_dir`` in one MLflow run (:class:`Recorded`); ``headline_path``: also write
    :func:`stsreg.product.runners.eval_runner.headline`."""
    params = load_params(params_path)
    uri, tags = recorded.uri, _run_tags(**recorded.tags)
    tags.update({"data_sha256.sts.parquet": sha256_file(sts_path), "model_dir": model_dir})
    logged = {"evaluate": dataclasses.asdict(params.evaluate), "seed": params.seed}
    with tracking.tracked_run(recorded.experiment, recorded.name, logged, tags, uri) as run:
        metrics = run_evaluate(params, Path(model_dir), Path(sts_path), Path(out_dir))
        tested = [t.name for t in params.prepare.sts_tables]  # lineage: every test table scored
        log_tables(tracking.client(uri), run.run_id, sts_path, {"evaluation": [(t, "test") for t in tested]})
        tracking.log_metrics(run.run_id, metrics, uri=uri)
        tracking.client(uri).set_tag(run.run_id, "precision", metrics["precision"])
        for name in ("table.md", "metrics.json", "predictions.parquet"):
            tracking.client(uri).log_artifact(run.run_id, str(Path(out_dir) / name), artifact_path="eval")
    atomic.write_text(Path(out_dir) / "mlflow_run.json", json.dumps({"run_id": run.run_id}))
    if headline_path:
        atomic.write_text(headline_path, json.dumps(eval_headline(metrics), indent=2))
    return {"run_id": run.run_id, **metrics}


@flow(name="stsreg-evaluate")
def evaluate_flow(params_path: str = "params.yaml", model_dir: str = "models/stage2",
                  sts_path: str = "data/prepared/sts.parquet", out_dir: str = "reports/eval",
                  headline_path: str | None = None) -> dict:
    return evaluate_task(params_path, model_dir, sts_path, out_dir, headline_path)


def params_hash(params_path: str) -> str:
    """Fingerprint of the resolved params (defaults filled in), so equal settings hash equal however written."""
    return fingerprint(dataclasses.asdict(load_params(params_path)))


@task(name="register")
def register_task(params_path: str, model_dir: str, eval_dir: str, data_paths: list[str], out_path: str,
                  sts_path: str = "data/prepared/sts.parquet") -> dict:
    """Package ``model_dir`` (:func:`stsreg.product.serving.packaging.package`: the evaluated length, ONNX exports
    scored on ``sts_path``'s evaluation pairs), log and register it with its model card; the version to ``out_path``,
    the card (``model_card.md``) and the backends' verdicts (``backends.json``) beside it."""
    params = load_params(params_path)
    learned_nothing = warm_start.nothing_learned(_summary(model_dir))
    if learned_nothing:  # the folder is the champion's own weights: no second copy in the registry
        return _not_registered(learned_nothing, params.stage2.dev_table, out_path)
    evaluated = [Path(eval_dir) / name for name in ("mlflow_run.json", "metrics.json")]
    if not all(path.exists() for path in evaluated):
        raise InputError(f"{model_dir} has no evaluation in {eval_dir} to register it with (no "
                         f"{' or '.join(p.name for p in evaluated if not p.exists())}): run `stsreg evaluate` (or "
                         "`dvc repro evaluate`) first")
    run_id = json.loads(evaluated[0].read_text())["run_id"]
    metrics = json.loads(evaluated[1].read_text())
    commit = tracking.git_commit()
    tags = {f"data_sha256.{Path(p).name}": sha256_file(p) for p in data_paths}
    tags.update({"params_hash": params_hash(params_path), "git_commit": commit,
                 "avg7_spearman": f"{metrics['avg7_spearman']:.2f}",
                 "avg7_unseen_spearman": f"{metrics['avg7_unseen_spearman']:.2f}",
                 DEV_METRIC: f"{metrics.get(DEV_METRIC, float('nan')):.2f}"})
    # its own MLflow run ("register": exports and their scoring; precision of the exports' runs: fp32) times the step
    with tracking.tracked_run(EXPERIMENT, "register", {}, _run_tags(precision="fp32", eval_run_id=run_id)), \
            tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        verdicts = packaging.package(params, Path(model_dir), folder, Path(sts_path), metrics)
        tags.update(packaging.tags(verdicts))
        card = model_card.render(params, folder, metrics, (Path(eval_dir) / "table.md").read_text(encoding="utf-8"),
                                 commit, backends=verdicts)
        files = registry.VersionFiles(folder, Path(eval_dir) / "predictions.parquet", card, params.serve.scale,
                                      params.serve.backend)
        mv = registry.log_and_register(run_id, files, tags)
    atomic.write_text(Path(out_path).with_name("model_card.md"), card)
    atomic.write_text(Path(out_path).with_name("backends.json"), json.dumps(verdicts, indent=2))
    out = {"name": mv.name, "version": int(mv.version), "run_id": run_id, "alias": "challenger", "tags": tags}
    atomic.write_text(out_path, json.dumps(out, indent=2))
    return out


def _summary(model_dir: str) -> dict:
    path = Path(model_dir) / "training_summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _not_registered(found: dict, dev_table: str, out_path: str) -> dict:
    """A warm retrain that learned nothing (:func:`stsreg.product.runners.warm_start.nothing_learned`): the register
    stage's outputs say so (``registered: false`` and why) and the registry is left as it was."""
    reason = warm_start.nothing_learned_text(found, dev_table)
    out = {"registered": False, "version": None, "alias": None, "nothing_learned": found, "reason": reason}
    atomic.write_text(out_path, json.dumps(out, indent=2))
    atomic.write_text(Path(out_path).with_name("model_card.md"), f"# No new version\n\n{reason}.\n")
    atomic.write_text(Path(out_path).with_name("backends.json"), json.dumps({}, indent=2))
    return out


@flow(name="stsreg-register")
def register_flow(params_path: str = "params.yaml", model_dir: str = "models/stage2", eval_dir: str = "reports/eval",
                  data_paths: tuple[str, ...] = ("data/prepared/sts.parquet", "data/prepared/nli_train.parquet"),
                  out_path: str = "reports/registry/challenger.json",
                  sts_path: str = "data/prepared/sts.parquet") -> dict:
    return register_task(params_path, model_dir, eval_dir, list(data_paths), out_path, sts_path)


@task(name="promote")
def promote_task(params_path: str, out_path: str, sts_path: str = "data/prepared/sts.parquet",
                 headline_path: str | None = None, challenger_path: str | None = None) -> dict:
    """The gate; the whole decision to ``out_path``, its numbers (``headline``) to ``headline_path``. When the gate
    fails (no decision), both files say so (``{"status": "failed", "error": ...}``, written atomically) instead of
    describing an earlier decision as if it were today's. When the register stage registered nothing
    (``challenger_path``, default ``challenger.json`` beside ``out_path``, says ``registered: false``: a warm retrain
    that learned nothing), nothing is judged and the decision says why (an earlier challenger is never judged in its
    place)."""
    challenger_path = challenger_path or str(Path(out_path).with_name("challenger.json"))
    try:
        registered = json.loads(Path(challenger_path).read_text()) if Path(challenger_path).exists() else {}
        if registered.get("registered") is False:
            decision = {"promoted": False, "challenger": None, "champion": registered["nothing_learned"]["version"],
                        "reason": registered["reason"], "nothing_learned": registered["nothing_learned"]}
            atomic.write_text(out_path, json.dumps(decision, indent=2))
            if headline_path:
                atomic.write_text(headline_path, json.dumps(headline(decision), indent=2))
            return decision
        return _promote(params_path, out_path, sts_path, headline_path, registered.get("version"))
    except BaseException as exc:
        failed = json.dumps({"status": "failed", "promoted": False, "error": f"{type(exc).__name__}: {exc}"}, indent=2)
        for path in (out_path, headline_path):
            if path:
                atomic.write_text(path, failed)
        raise


def _promote(params_path: str, out_path: str, sts_path: str, headline_path: str | None,
             version: int | None = None) -> dict:
    params = load_params(params_path)
    # precision "none" unless the backbone is evaluated (no champion yet): then the evaluation's precision
    logged = {"promote": dataclasses.asdict(params.promote), "seed": params.seed}
    with tracking.tracked_run(EXPERIMENT, "promote", logged, _run_tags(precision="none")) as run:

        def backbone_predictions():  # only run when there is no champion yet
            import pandas as pd


            with tempfile.TemporaryDirectory() as tmp:
                metrics = run_evaluate(params, Path(resolve_backbone(params.model.backbone)), Path(sts_path), Path(tmp))
                tracking.client(run.uri).set_tag(run.run_id, "precision", metrics["precision"])
                return pd.read_parquet(Path(tmp) / "predictions.parquet")

        def champion_predictions(version, pairs):  # only when its stored predictions miss today's test pairs
            import pandas as pd

            with tempfile.TemporaryDirectory() as tmp:
                folder = registry.model_folder(version, run.uri, tmp)
                if pairs is not None:  # the pairs it lacks, scored as the evaluation scores them
                    return score_pairs(load_for_eval(folder, params.evaluate.max_length, params.model.pooling,
                                                     params.model.precision), pairs, params.evaluate.batch_size)
                run_evaluate(params, folder, Path(sts_path), Path(tmp) / "eval")
                return pd.read_parquet(Path(tmp) / "eval" / "predictions.parquet")

        fallbacks = registry.Fallbacks(backbone_predictions if params.promote.against_backbone else None,
                                       f"the untouched backbone {params.model.backbone!r}", champion_predictions)
        decision = registry.promote(params.promote, params.evaluate.n_resamples, params.seed, version=version,
                                    fallbacks=fallbacks)
        test = decision.get("test") or {}
        per_metric = {f"gain_{crit}_{k}": t[k] for crit, t in (decision.get("tests") or {}).items()
                      for k in (*GAIN_KEYS, "pairs") if k in t}
        tracking.log_metrics(run.run_id, {"promoted": float(decision["promoted"]), **per_metric,
                                          **{f"gain_{k}": test[k] for k in GAIN_KEYS if k in test}}, uri=run.uri)
    atomic.write_text(out_path, json.dumps(decision, indent=2))
    if headline_path:
        atomic.write_text(headline_path, json.dumps(headline(decision), indent=2))
    return decision


def headline(decision: dict) -> dict:
    """The numbers of a promotion decision (``dvc metrics show``): promoted, versions, gain and its p-value."""
    test = decision.get("test") or {}
    out = {"promoted": decision["promoted"], "challenger": decision["challenger"], "champion": decision["champion"]}
    out.update({k: test[k] for k in GAIN_KEYS if k in test})
    return out


@flow(name="stsreg-promote")
def promote_flow(params_path: str = "params.yaml", out_path: str = "reports/registry/promotion.json",
                 sts_path: str = "data/prepared/sts.parquet", headline_path: str | None = None) -> dict:
    return promote_task(params_path, out_path, sts_path, headline_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Run a stsreg release flow.")
    ap.add_argument("step", choices=["evaluate", "register", "promote"])
    ap.add_argument("--params", default="params.yaml")
    a = ap.parse_args()
    print({"evaluate": evaluate_flow, "register": register_flow, "promote": promote_flow}[a.step](params_path=a.params))
