"""Evaluate -> register -> promote on tiny models against a real MLflow SQLite registry, and the served model.

The gate is exercised three ways: with no champion yet, the untouched backbone is not promoted (it does not beat
itself) while a fine-tuned model that is clearly better than the backbone is; then a worse (untrained) one is
registered as challenger but the champion stays.
"""

import json
import logging
import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import requests
import torch
import yaml

from stsreg.infra.config import Stage2Params
from stsreg.product.serving import export
from stsreg.product.model import SiameseRegressor
from stsreg.product.model_files import TRAIN_ROWS
from stsreg.product.training.replay import row_hashes
from tests.helpers.training import fine_tune_params as fine_tune
from tests.conftest import REPO, free_port, tiny_eval_table, tiny_sts

NAME = "sts-regression"


@pytest.fixture(scope="module")
def registry(harness, tiny_backbone, tmp_path_factory):
    """Runs the three releases once for the module; yields (workdir, tracking uri, decisions)."""
    from pipelines.product.release_flow import evaluate_flow, promote_flow, register_flow
    from stsreg.infra import tracking

    work = tmp_path_factory.mktemp("release")
    uri = f"sqlite:///{work}/mlflow/mlflow.db"
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["evaluate"].update(max_length=16, batch_size=32, n_resamples=200)
    raw["model"].update(backbone=tiny_backbone)  # with no champion, the gate compares against this backbone
    (work / "params.yaml").write_text(yaml.safe_dump(raw))
    tiny_eval_table().to_parquet(work / "sts.parquet")
    pd.DataFrame({"premise": ["a"], "hypothesis": ["b"], "label": [0]}).to_parquet(work / "nli.parquet")

    untrained = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)
    untrained.save(work / "untrained")
    torch.manual_seed(0)
    p = Stage2Params(batch_size=8, epochs=3, eval_every=1000, checkpoint_every_s=3600, lr=1e-3, warmup_ratio=0.1)
    fine_tune(SiameseRegressor.load(work / "untrained"), tiny_sts(240, seed=7), tiny_sts(40, seed=8), p, 3,
              work / "trained", work / "ck", device=torch.device("cpu"))
    # the champion's own train rows, as stage 2 keeps them: 24 of the 32 that the warm retrain's table holds
    np.save(work / "trained" / TRAIN_ROWS, row_hashes(_warm_train().head(24)))

    decisions = {}
    for i, model in enumerate(["untrained", "trained", "untrained"]):
        ev = evaluate_flow(params_path=str(work / "params.yaml"), model_dir=str(work / model),
                           sts_path=str(work / "sts.parquet"), out_dir=str(work / f"eval{i}"),
                           headline_path=str(work / f"eval{i}.json"))
        reg = register_flow(params_path=str(work / "params.yaml"), model_dir=str(work / model),
                            eval_dir=str(work / f"eval{i}"),
                            data_paths=(str(work / "sts.parquet"), str(work / "nli.parquet")),
                            out_path=str(work / f"reg{i}.json"),
                            sts_path=str(work / "sts.parquet"))
        decisions[i] = {"eval": ev, "register": reg,
                        "promote": promote_flow(params_path=str(work / "params.yaml"),
                                                out_path=str(work / f"prom{i}.json"),
                                                sts_path=str(work / "sts.parquet"),
                                                headline_path=str(work / f"prom{i}.head.json"))}
    yield work, uri, decisions, tracking.client()
    if old is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = old


def test_evaluation_run_holds_metrics_and_predictions(registry):
    work, _, decisions, c = registry
    ev = decisions[1]["eval"]
    run = c.get_run(ev["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.metrics["avg7_spearman"] == pytest.approx(ev["avg7_spearman"])
    assert {"sts12_spearman", "sickr_spearman", "avg7_unseen_spearman", "stsb_dev_spearman"} <= set(run.data.metrics)
    assert {a.path for a in c.list_artifacts(ev["run_id"], "eval")} >= {"eval/predictions.parquet", "eval/table.md"}
    # lineage: each test table scored is an MLflow dataset of the run (name, digest, rows), context evaluation
    inputs = {d.dataset.name: d for d in run.inputs.dataset_inputs}
    assert {"sts12/test", "stsb/test", "sickr/test"} <= set(inputs) and len(inputs["stsb/test"].dataset.digest) >= 8
    assert {t.value for t in inputs["stsb/test"].tags} == {"evaluation"}
    # the headline file (what `dvc metrics show` prints): exactly the declared keys, equal to the full metrics
    from stsreg.product import sts_eval
    from stsreg.product.runners.eval_runner import HEADLINE

    headline = json.loads((work / "eval1.json").read_text())
    assert sts_eval.PRIMARY_METRIC == "avg7_spearman" and list(headline) == list(HEADLINE)
    assert all(headline[k] == ev[k] for k in headline)
    promotion = json.loads((work / "prom1.head.json").read_text())
    decision = decisions[1]["promote"]
    assert promotion == {"promoted": decision["promoted"], "challenger": decision["challenger"],
                         "champion": decision["champion"],
                         **{k: decision["test"][k] for k in ("diff", "low", "high", "p_value")}}
    # the fine-tuned model really is better than the untrained one on the synthetic tasks
    assert decisions[1]["eval"]["avg7_spearman"] > decisions[0]["eval"]["avg7_spearman"] + 10


def test_versions_aliases_tags_and_gate_decisions(registry):
    work, _, decisions, c = registry
    assert [decisions[i]["register"]["version"] for i in range(3)] == [1, 2, 3]
    first, better, worse = (decisions[i]["promote"] for i in range(3))
    # no champion: the untrained model (= the backbone) does not beat the backbone, so nothing is promoted ...
    assert not first["promoted"] and "untouched backbone" in first["reason"] and abs(first["test"]["diff"]) < 1e-9
    assert first["champion"] is None and "no champion yet: gain below margin" in first["reason"]
    # ... and the fine-tuned one beats the backbone significantly and becomes the first champion
    assert better["promoted"] and better["champion"] is None and "untouched backbone" in better["reason"]
    assert better["test"]["diff"] > 0.1 and better["test"]["p_value"] < 0.05
    assert not worse["promoted"] and "kept the champion" in worse["reason"]
    assert int(c.get_model_version_by_alias(NAME, "champion").version) == 2
    assert int(c.get_model_version_by_alias(NAME, "challenger").version) == 3
    v3 = c.get_model_version(NAME, "3")
    assert v3.tags["promotion.decision"] == "kept champion" and "below margin" in v3.tags["promotion.reason"]
    assert {"params_hash", "git_commit", "avg7_spearman", "data_sha256.sts.parquet",
            "data_sha256.nli.parquet"} <= set(v3.tags)
    assert json.loads((work / "prom2.json").read_text())["promoted"] is False


def test_a_warm_retrain_starts_from_the_champion_and_names_it(registry, tmp_path):
    """``stage2.warm_start``: stage 2 starts from the champion ``champion.json`` pins (its dev score is the curve's
    step 0), trains its own epochs and lr, and names the version in the summary, the run's tags and the card; with
    another backbone, or no champion pinned, it starts from stage 1 and says why; a pin the registry cannot honour
    (a version it lacks, other weights) is refused, naming the file."""
    from pipelines.product.stage2_flow import tracked_stage2
    from stsreg.infra.config import load_params
    from stsreg.infra.errors import InputError
    from stsreg.product.champion_pin import Pin, current_champion, write_pin
    from stsreg.product.runners.warm_start import starting_point
    from stsreg.product.sts_eval import spearman_cosine

    work, uri, _, c = registry
    champion = c.get_model_version_by_alias(NAME, "champion")
    raw = yaml.safe_load((work / "params.yaml").read_text())
    raw["stage2"].update(batch_size=8, eval_every=1000, checkpoint_every_s=0,
                         warm_start={"enabled": True, "epochs": 1, "lr": 3e-5, "task_replay": 100.0})  # every row
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    pin = current_champion(uri)
    assert pin.version == int(champion.version) and len(pin.weights) == 64
    write_pin(pin, tmp_path / "champion.json")
    sts = _warm_table()
    sts.to_parquet(tmp_path / "sts.parquet")
    summary = tracked_stage2(str(tmp_path / "params.yaml"), str(tmp_path / "sts.parquet"), str(work / "untrained"),
                             str(tmp_path / "out"), str(tmp_path / "ck"))
    origin = {"from": "champion", "version": int(champion.version), "run_id": champion.run_id, "weights": pin.weights}
    assert {k: v for k, v in summary["started_from"].items() if k != "rows"} == origin
    assert summary["started_from"]["rows"]["new"] == 8 and summary["started_from"]["rows"]["replayed"] == 24
    assert json.loads((tmp_path / "out/training_summary.json").read_text())["started_from"] == summary["started_from"]
    assert summary["config"]["stage2"]["epochs"] == 1 and summary["config"]["stage2"]["lr"] == 3e-5
    assert summary["total_steps"] == 4  # 32 pairs, batch 8, the warm start's 1 epoch (stage2.epochs is 3)
    dev = sts[(sts.dataset == "stsb") & (sts.split == "dev")]
    trained = SiameseRegressor.load(work / "trained", precision="fp32")
    trained.config.max_length = raw["model"]["max_length"]
    assert summary["start_dev_spearman"] == pytest.approx(
        spearman_cosine(trained, dev.sentence1, dev.sentence2, dev.score, 64, show_progress=False), abs=1e-6)
    assert c.get_run(summary["run_id"]).data.tags["warm_start.version"] == str(champion.version)
    assert f"started from champion v{champion.version} (a warm retrain)" in (tmp_path / "out/README.md").read_text()

    assert np.array_equal(np.load(tmp_path / "out" / TRAIN_ROWS), row_hashes(_warm_train()))  # the next one's

    other = load_params(tmp_path / "params.yaml")
    other = other.__class__(**{**other.__dict__, "model": other.model.__class__(backbone="some/other-model")})
    cold = starting_point(other, work / "untrained", pin_path=tmp_path / "champion.json")
    assert cold.init == work / "untrained" and cold.params == other and "some/other-model" in cold.origin["why"]
    write_pin(Pin(None), tmp_path / "none.json")
    cold = starting_point(load_params(tmp_path / "params.yaml"), work / "untrained", pin_path=tmp_path / "none.json")
    assert cold.init == work / "untrained" and cold.origin == {"from": "stage1",
                                                               "why": "no champion: stage 2 starts from stage 1"}
    with pytest.raises(InputError, match="champion.json pins champion v2 .* which the registry at .* does not hold"):
        starting_point(load_params(tmp_path / "params.yaml"), work / "untrained", uri=f"sqlite:///{tmp_path}/empty.db",
                       pin_path=tmp_path / "champion.json")
    write_pin(Pin(pin.version, pin.run_id, "0" * 64, pin.backbone), tmp_path / "other.json")
    with pytest.raises(InputError, match="but the registry's v2 has weights"):
        starting_point(load_params(tmp_path / "params.yaml"), work / "untrained", pin_path=tmp_path / "other.json")


def test_a_warm_retrain_replays_a_fraction_of_the_champions_rows_beside_every_new_one(registry, tmp_path):
    """``stage2.warm_start.task_replay``: the 8 rows the champion never drew from all train, with 1.5 of its own
    per new row (12 of 24); the summary, the card and the next model's ``train_rows.npy`` say so."""
    from pipelines.product.stage2_flow import tracked_stage2
    from stsreg.product.champion_pin import pin_champion

    work, uri, _, c = registry
    champion = c.get_model_version_by_alias(NAME, "champion")
    raw = yaml.safe_load((work / "params.yaml").read_text())
    raw["stage2"].update(batch_size=8, eval_every=1000, checkpoint_every_s=0,
                         warm_start={"enabled": True, "epochs": 1, "lr": 3e-5, "task_replay": 1.5})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    pin, _ = pin_champion(tmp_path / "champion.json", uri)
    _warm_table().to_parquet(tmp_path / "sts.parquet")
    summary = tracked_stage2(str(tmp_path / "params.yaml"), str(tmp_path / "sts.parquet"), str(work / "untrained"),
                             str(tmp_path / "out"), str(tmp_path / "ck"))
    rows = {"new": 8, "replayed": 12, "old": 24, "task": {"table": "stsb", "replayed": 12, "old": 24, "per_new": 1.5},
            "other": {"replayed": 0, "old": 0, "per_new": 4.0}}
    assert summary["started_from"] == {"from": "champion", "version": int(champion.version),
                                       "run_id": champion.run_id, "weights": pin.weights, "rows": rows}
    assert summary["total_steps"] == 3  # 8 + 12 rows, batch 8 (all 32 would be 4)
    assert (f"started from champion v{champion.version} (a warm retrain) on 8 new rows, 12 of 24 old stsb rows and 0 "
            "of 0 other old rows replayed") in (tmp_path / "out/README.md").read_text()
    assert np.array_equal(np.load(tmp_path / "out" / TRAIN_ROWS), row_hashes(_warm_train()))  # drawn from: all 32


def test_a_warm_retrain_that_learned_nothing_registers_nothing_and_says_so(registry, tmp_path):
    """A warm stage 2 whose steps never beat the champion on dev keeps step 0, the champion's own weights: the register
    stage registers no copy (its outputs say ``registered: false`` and why), the gate judges nothing (no earlier
    challenger in its place) and leaves the aliases alone, and `stsreg report` says "nothing learned from N new rows"
    with the dev scores."""
    from pipelines.product.release_flow import promote_flow, register_flow
    from pipelines.product.stage2_flow import tracked_stage2
    from stsreg.product.champion_pin import pin_champion
    from stsreg.product.run_report import run_report

    work, uri, _, c = registry
    champion = c.get_model_version_by_alias(NAME, "champion")
    versions = sorted(int(v.version) for v in c.search_model_versions(f"name='{NAME}'"))
    raw = yaml.safe_load((work / "params.yaml").read_text())
    # an lr far below one ulp of the weights: every step leaves them as they were, so no step beats step 0
    raw["stage2"].update(batch_size=8, eval_every=2, checkpoint_every_s=3600,
                         warm_start={"enabled": True, "epochs": 1, "lr": 1e-15, "task_replay": 1.5})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    pin_champion(tmp_path / "champion.json", uri)
    _warm_table().to_parquet(tmp_path / "sts.parquet")
    summary = tracked_stage2(str(tmp_path / "params.yaml"), str(tmp_path / "sts.parquet"), str(work / "untrained"),
                             str(tmp_path / "models/stage2"), str(tmp_path / "ck"))
    assert summary["best_step"] == 0 and summary["started_from"]["from"] == "champion"

    reg = register_flow(params_path=str(tmp_path / "params.yaml"), model_dir=str(tmp_path / "models/stage2"),
                        eval_dir=str(tmp_path / "no-eval"), out_path=str(tmp_path / "registry/challenger.json"),
                        sts_path=str(tmp_path / "sts.parquet"))
    new_rows = summary["started_from"]["rows"]["new"]
    assert reg["registered"] is False and reg["version"] is None
    assert reg["reason"].startswith(f"nothing learned from {new_rows} new rows: stsb dev "
                                    f"{summary['start_dev_spearman']:.2f} at the start (champion v{champion.version})")
    assert reg["reason"].endswith("no challenger registered")
    assert json.loads((tmp_path / "registry/challenger.json").read_text()) == reg
    assert (tmp_path / "registry/model_card.md").read_text().startswith("# No new version")
    assert sorted(int(v.version) for v in c.search_model_versions(f"name='{NAME}'")) == versions

    challenger = c.get_model_version_by_alias(NAME, "challenger")
    decision = promote_flow(params_path=str(tmp_path / "params.yaml"), out_path=str(tmp_path / "registry/p.json"),
                            sts_path=str(tmp_path / "sts.parquet"), headline_path=str(tmp_path / "head.json"))
    assert decision["promoted"] is False and decision["challenger"] is None and decision["reason"] == reg["reason"]
    assert c.get_model_version_by_alias(NAME, "champion").version == champion.version
    assert c.get_model_version_by_alias(NAME, "challenger").version == challenger.version  # not judged again
    assert json.loads((tmp_path / "head.json").read_text())["promoted"] is False

    (tmp_path / "summary.json").write_text(json.dumps({"datasets": {}, "leakage": {}, "leakage_match": "exact",
                                                       "nli_train_rows": 0}))
    (tmp_path / "eval.json").write_text(json.dumps({"avg7_spearman": 50.0}))  # an earlier run's: not shown
    text = run_report(tmp_path / "summary.json", tmp_path / "models", tmp_path / "eval.json",
                      tmp_path / "registry/p.json")
    assert f"No new version: nothing learned from {new_rows} new rows: STS-B dev" in text
    assert "Evaluation of models/stage2" not in text and "Registry:" not in text


def _warm_table() -> pd.DataFrame:
    """The evaluation's tables and 32 STS-B train pairs: the warm retrains' prepared table."""
    return pd.concat([tiny_eval_table(), tiny_sts(32, seed=9).assign(dataset="stsb", split="train", subset="A",
                                                                     file="stsb/train.txt", line=range(1, 33),
                                                                     seen_in_train=False)], ignore_index=True)


def _warm_train() -> pd.DataFrame:
    """The warm table's rows that stage 2 trains on (its train tables' train split)."""
    from stsreg.product.data.catalogue import sts_training_pairs

    return sts_training_pairs(_warm_table())


def test_champion_eval_flow_evaluates_the_champion_and_tags_its_version(registry, caplog):
    """The scheduled champion evaluation: downloads ``@champion`` from the registry, runs the release flow's evaluate
    task in experiment ``stsreg-champion`` and tags the version; same model and data, so the same avg7."""
    from pipelines.product.ops_flow import champion_eval_flow

    work, _, decisions, c = registry
    with caplog.at_level(logging.INFO):
        out = champion_eval_flow(project_dir=str(work), params_path="params.yaml", sts_path="sts.parquet",
                                 heartbeat_s=0.05)
    assert out["version"] == 2  # the fine-tuned model promoted in the fixture
    # the flow-run log says the evaluation still runs while it is silent (every 30 s in a deployment)
    assert any(r.getMessage().startswith("still evaluating champion v2") for r in caplog.records)
    assert out["avg7_spearman"] == pytest.approx(decisions[1]["eval"]["avg7_spearman"], abs=1e-6)
    run = c.get_run(out["run_id"])
    assert (
        run.info.status == "FINISHED" and run.info.run_name == "champion-v2" and run.data.tags["model_version"] == "2"
    )
    assert c.get_experiment(run.info.experiment_id).name == "stsreg-champion"
    tags = c.get_model_version(NAME, "2").tags
    assert (
        tags["last_eval.avg7_spearman"] == f"{out['avg7_spearman']:.2f}" and tags["last_eval.run_id"] == out["run_id"]
    )


def test_pyfunc_loads_offline_and_scores(registry):
    import mlflow.pyfunc

    _, uri, _, _ = registry
    mlflow.set_tracking_uri(uri)
    model = mlflow.pyfunc.load_model(f"models:/{NAME}@champion")
    out = model.predict(pd.DataFrame({"sentence1": ["a man plays guitar", "the dog runs"],
                                      "sentence2": ["a woman plays music", "a cat sleeps"]}))
    assert list(out.columns) == ["cosine", "score"] and len(out) == 2 and out.cosine.between(-1, 1).all()
    # the pyfunc was written straight into the run's local artifact store: MLmodel, code and one copy of the weights
    from mlflow import MlflowClient

    c = MlflowClient(uri)
    run_id = c.get_model_version_by_alias(NAME, "champion").run_id
    listed = {f.path for f in c.list_artifacts(run_id, "model")}
    assert {"model/MLmodel", "model/artifacts", "model/code"} <= listed
    (weights,) = [f.path for f in c.list_artifacts(run_id, "model/artifacts")]  # the model folder, copied once
    assert f"{weights}/model.safetensors" in {f.path for f in c.list_artifacts(run_id, weights)}


def clean_env() -> dict[str, str]:
    """What a user's shell has: no MLFLOW_* or PREFECT_* variable, the venv on PATH, the offline hub."""
    keep = {k: os.environ[k] for k in ("HOME", "LANG", "UV_CACHE_DIR") if k in os.environ}
    return {**keep, "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
            "STSREG_USE_SERVERS": "0"}


@pytest.fixture(scope="module")
def server(registry):
    work, uri, _, _ = registry
    assert uri == f"sqlite:///{work}/mlflow/mlflow.db"  # the embedded store of a project in `work`
    port = free_port()
    # the README's `make serve`, run the way a user runs it: from the project folder, no MLFLOW_TRACKING_URI set
    # (the champion is found in the project's own store); 4 MB bodies for these tests
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "stsreg"), "serve", "--model-uri",
                             f"models:/{NAME}@champion", "--host", "127.0.0.1", "--port", str(port), "--max-body-mb",
                             "4"],
                            cwd=work, env=clean_env(), stdout=open(work / "serve.log", "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            if requests.get(url + "/ready", timeout=2).status_code == 200:  # live at once, ready once loaded
                break
        except requests.ConnectionError:
            pass
        assert proc.poll() is None, (work / "serve.log").read_text()[-3000:]
        time.sleep(1)
    else:
        proc.kill()
        pytest.fail("model server did not start: " + (work / "serve.log").read_text()[-3000:])
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_served_precision_is_a_setting_printed_at_start_and_answered_at_metadata(server, registry):
    """`serve.precision` (default auto) decides bf16 or fp32; the start line and GET /metadata say which is in use,
    and --precision overrides the setting (the forced mode is what the model computes in)."""
    import torch

    from stsreg.product.serving.model_uri import resolve
    from stsreg.product.serving.serve import build_app
    from stsreg.product.serving.server_config import Compute, ServerConfig

    work, uri, _, _ = registry
    meta = requests.get(server + "/metadata", timeout=30).json()
    # auto: the fastest backend here
    # auto: torch in fp32 on any CPU (bf16 there moves a text's vector with its batch)
    expected = {"torch": "fp32", "onnx": "fp32",
                "onnx-int8": "int8 weights and activations (per token)"}[meta["backend"]]
    assert meta["precision_setting"] == "auto" and meta["precision"] == expected and meta["device"] == "cpu"
    # auto says what it chose and why, from the measurements it answers beside
    assert meta["auto"]["chosen"] == meta["backend"] and meta["backend"] in meta["backends_measured"]
    assert meta["auto"]["why"].startswith(meta["backend"] + ": ") and all(
        f"{b} {r['batch1_p50_ms']:.1f} ms alone" in meta["auto"]["why"] for b, r in meta["backends_measured"].items())
    # one maximum length: the evaluation's (evaluate.max_length of the fixture's params), stored with the version
    assert meta["max_length"] == yaml.safe_load((work / "params.yaml").read_text())["evaluate"]["max_length"] == 16
    assert f"precision {expected} (setting auto)" in (work / "serve.log").read_text()
    for forced in ("bf16", "fp32"):
        app = build_app(ServerConfig(artifact_uri=resolve(f"models:/{NAME}@champion", uri), tracking_uri=uri,
                                     compute=Compute(precision=forced, backend="torch")))
        assert json.loads(app.metadata)["precision"] == forced  # torch's setting (the ONNX backends run their own)


def test_served_score_is_given_on_the_declared_scale(server, registry):
    """The served score is on [0, 5] by default (the registered model config, answered at /metadata); `serve.scale`
    (or --scale) gives the same score mapped linearly to another scale, the cosine unchanged."""
    import mlflow.artifacts
    import mlflow.pyfunc
    import pandas as pd

    from stsreg.product.serving.model_uri import resolve
    from stsreg.product.serving.serve import build_app
    from stsreg.product.serving.server_config import Compute, ServerConfig

    work, uri, _, _ = registry
    assert requests.get(server + "/metadata", timeout=30).json()["score_scale"] == [0.0, 5.0]
    pair = pd.DataFrame({"sentence1": ["a man plays guitar"], "sentence2": ["a woman plays music"]})
    default = json.loads(build_app(ServerConfig(artifact_uri=resolve(f"models:/{NAME}@champion", uri),
                                                tracking_uri=uri)).metadata)
    assert default["score_scale"] == [0.0, 5.0]
    on_0_5 = _post(server, {"dataframe_records": pair.to_dict("records")}).json()["predictions"][0]
    app = build_app(ServerConfig(artifact_uri=resolve(f"models:/{NAME}@champion", uri), tracking_uri=uri,
                                 compute=Compute(scale=(1.0, 10.0))))
    assert json.loads(app.metadata)["score_scale"] == [1.0, 10.0]
    local = mlflow.artifacts.download_artifacts(artifact_uri=resolve(f"models:/{NAME}@champion", uri), tracking_uri=uri)
    backend = requests.get(server + "/metadata", timeout=30).json()["backend"]  # the same computation as the server's
    model = mlflow.pyfunc.load_model(local, model_config={"scale": [1.0, 10.0], "backend": backend})
    on_1_10 = model.predict(pair).iloc[0]
    assert on_1_10.score == pytest.approx(1.0 + on_0_5["score"] * 9.0 / 5.0, abs=1e-4)
    assert on_1_10.cosine == pytest.approx(on_0_5["cosine"], abs=1e-5)


def _folder(c, alias, work):
    """The registered model folder (weights, exports) of the version behind ``alias``."""
    from stsreg.product import registry

    return registry.model_folder(c.get_model_version_by_alias(NAME, alias), c.tracking_uri, work / f"dl-{alias}")


def test_versions_carry_onnx_exports_with_their_measured_quality(registry):
    """Registration exports the encoder to ONNX fp32 and int8, scores both on the evaluation's pairs at the evaluated
    length, and records avg7 and the drop against torch as tags, in the card and in the folder (what serving reads);
    the fp32 export gives torch's embeddings (round trip), int8 close to them."""
    work, _, decisions, c = registry
    folder = _folder(c, "champion", work)
    assert export.available(folder) == ["torch", "onnx", "onnx-int8"]
    quality = export.read_quality(folder)
    tags = c.get_model_version(NAME, "2").tags
    torch_avg7 = decisions[1]["eval"]["avg7_spearman"]
    for backend in ("onnx", "onnx-int8"):
        v = quality[backend]
        assert v["drop"] == pytest.approx(torch_avg7 - v["avg7"]) and v["serving"] == (v["drop"] <= 0.3)
        assert (
            tags[f"backend.{backend}.avg7"] == f"{v['avg7']:.2f}"
            and tags[f"backend.{backend}.serving"] == str(v["serving"]).lower()
        )
    assert abs(quality["onnx"]["drop"]) < 0.05  # fp32: the same function up to float rounding
    card = (work / "reg1.json").with_name("model_card.md").read_text()  # the last registration's card (v3)
    assert "## Serving backends" in card and "| onnx-int8 | `onnx/model_qint8.onnx`" in card
    assert json.loads((work / "backends.json").read_text()) == export.read_quality(_folder(c, "challenger", work))
    sentences = ["a man plays guitar", "the dog runs in the park", "a woman slices an onion"]
    reference = SiameseRegressor.load(folder, precision="fp32").encode(sentences, show_progress=False)  # as the graph
    for backend, atol in (("onnx", 1e-4), ("onnx-int8", None)):
        got = export.use_backend(SiameseRegressor.load(folder), backend, folder).encode(sentences, show_progress=False)
        if atol:
            assert torch.allclose(got, reference, atol=atol)
        else:
            assert torch.nn.functional.cosine_similarity(got, reference).min() > 0.95


def test_auto_takes_the_measurement_registration_made_on_this_cpu(registry, tmp_path):
    """Registration measures what ``serve.backend: auto`` would (``onnx/auto_measured.json``: CPU, threads,
    precision, rates); a server on the same CPU takes it as it is (the very floats, so nothing was measured again),
    and one whose CPU differs measures anew."""
    import shutil

    import mlflow

    from stsreg.infra.tracking import cpu_name
    from stsreg.product.serving.model_uri import resolve

    work, uri, _, c = registry
    folder = tmp_path / "version"
    shutil.copytree(mlflow.artifacts.download_artifacts(artifact_uri=resolve(f"models:/{NAME}@champion", uri),
                                                        tracking_uri=uri), folder)
    (model_dir,) = [p.parent.parent for p in folder.glob("artifacts/*/" + export.MEASURED)]
    record = json.loads((model_dir / export.MEASURED).read_text())
    assert record["cpu"] == cpu_name() and record["threads"] == torch.get_num_threads()
    assert set(record["rates"]) == set(export.servable(model_dir)) and record["backend"] in record["rates"]
    model = SiameseRegressor.load(model_dir, precision=record["precision"])
    backend, rates = export.choose(model, model_dir)
    assert rates == record["rates"] and backend == export.pick(rates)
    (model_dir / export.MEASURED).write_text(json.dumps({**record, "cpu": "another CPU"}))
    backend, rates = export.choose(model, model_dir)
    assert set(rates) == set(record["rates"]) and rates != record["rates"]


def test_folders_load_in_sentence_transformers_with_the_projects_embeddings(registry):
    """A trained folder (what stage 2 writes) and a registered one load with `SentenceTransformer(path)` and give the
    project's embeddings; the registered one carries its card, cosine as its similarity function and the evaluated
    maximum length."""
    from sentence_transformers import SentenceTransformer

    work, _, _, c = registry
    sentences = ["a man plays guitar", "the dog runs in the park on the sofa"]
    for folder in (work / "trained", _folder(c, "champion", work)):
        ours = SiameseRegressor.load(folder, precision="fp32").encode(sentences, show_progress=False)  # as theirs
        theirs = SentenceTransformer(str(folder), device="cpu")
        assert theirs.max_seq_length == SiameseRegressor.load(folder).config.max_length
        assert torch.allclose(torch.from_numpy(theirs.encode(sentences)), ours, atol=1e-5)
    registered = _folder(c, "champion", work)
    theirs = SentenceTransformer(str(registered), device="cpu")
    assert theirs.similarity_fn_name == "cosine" and theirs.max_seq_length == 16
    emb = theirs.encode(sentences, convert_to_tensor=True)
    assert float(theirs.similarity(emb[:1], emb[1:])) == pytest.approx(
        float(torch.nn.functional.cosine_similarity(emb[:1], emb[1:])), abs=1e-6)
    assert (registered / "README.md").read_text().startswith("---\nbase_model:")


def test_each_backend_serves_the_readme_requests(registry):
    """Every backend the version may serve answers the README's pair and sentence requests with the same scores up to
    its precision; one it may not serve (kept out at registration) is refused with the reason."""
    from starlette.testclient import TestClient

    from stsreg.infra.errors import InputError
    from stsreg.product.serving.model_uri import resolve
    from stsreg.product.serving.serve import build_app
    from stsreg.product.serving.server_config import Compute, ServerConfig

    work, uri, _, c = registry
    source = resolve(f"models:/{NAME}@champion", uri)
    pair = {"dataframe_records": [{"sentence1": "A man is playing a guitar.", "sentence2": "Someone plays an "
                                                                                           "instrument."}]}
    sentence = {"dataframe_records": [{"sentence": "A man is playing a guitar."}]}
    answers = {}
    for backend in ("torch", "onnx", "onnx-int8"):
        app = build_app(ServerConfig(artifact_uri=source, tracking_uri=uri,
                                     compute=Compute(backend=backend, threads=1)))
        assert json.loads(app.metadata)["backend"] == backend
        client = TestClient(app)
        scored, embedded = client.post("/invocations", json=pair), client.post("/invocations", json=sentence)
        assert scored.status_code == embedded.status_code == 200, (scored.text, embedded.text)
        assert client.post("/invocations", json={"dataframe_records": [{"sentence1": "a"}]}).status_code == 400
        answers[backend] = scored.json()["predictions"][0]
    assert answers["onnx"]["cosine"] == pytest.approx(answers["torch"]["cosine"], abs=1e-4)
    assert answers["onnx-int8"]["cosine"] == pytest.approx(answers["torch"]["cosine"], abs=0.05)
    auto = json.loads(build_app(ServerConfig(artifact_uri=source, tracking_uri=uri,
                                             compute=Compute(backend="auto"))).metadata)
    assert auto["backend"] in auto["backends_measured"] and set(auto["backends_measured"]) == {"torch", "onnx",
                                                                                               "onnx-int8"}

    import mlflow.pyfunc

    kept_out = work / "kept-out"  # the champion's pyfunc, its int8 export judged out of bounds
    import shutil

    shutil.copytree(mlflow.artifacts.download_artifacts(artifact_uri=source, tracking_uri=uri), kept_out)
    (quality,) = kept_out.glob("artifacts/*/" + export.QUALITY)
    verdicts = export.judge({"torch": 80.0, "onnx": 80.0, "onnx-int8": 79.5}, 0.3)
    quality.write_text(json.dumps(verdicts))
    model = mlflow.pyfunc.load_model(str(kept_out), model_config={"backend": "auto"}).unwrap_python_model()
    assert model.backend in ("torch", "onnx") and "onnx-int8" not in model.rates
    with pytest.raises(InputError, match=r"may not serve backend 'onnx-int8': kept out of serving: avg7 drop 0.50 > "
                                         r"bound 0.3"):
        model.set_backend("onnx-int8")


def test_serve_with_two_workers_answers_on_one_port(registry):
    """`stsreg serve --workers 2 --backend onnx`: two processes on one port, each with the backend given, answering
    the README's request as the one-process server does."""
    work, _, _, _ = registry
    port = free_port()
    log = work / "serve-workers.log"
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "stsreg"), "serve", "--port", str(port),
                             "--workers", "2", "--backend", "onnx", "--threads", "1"],
                            cwd=work, env=clean_env(), stdout=open(log, "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_answering(url + "/ping", proc, log)
        assert "backend onnx" in log.read_text() and "2 worker(s) x 1 thread(s)" in log.read_text()
        pair = {"dataframe_records": [{"sentence1": "A man plays a guitar.", "sentence2": "Someone plays music."}]}
        answers = [_post(url, pair) for _ in range(6)]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        assert len({round(a.json()["predictions"][0]["cosine"], 5) for a in answers}) == 1
        assert requests.get(url + "/metadata", timeout=30).json()["backend"] == "onnx"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_answering(url: str, proc, log, timeout: float = 180) -> None:
    """Until ``url`` answers 200; the server's log when it exits or ``timeout`` passes first."""
    deadline = time.time() + timeout
    while True:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)


def _post(url, payload):
    return requests.post(url + "/invocations", json=payload, timeout=120)


def test_served_model_answers_embedding_requests(server, registry):
    work, _, _, c = registry
    sentences = ["a man plays guitar", "a woman plays music"]
    answer = _post(server, {"dataframe_records": [{"sentence": s} for s in sentences]})
    assert answer.status_code == 200, answer.text
    vectors = [row["embedding"] for row in answer.json()["predictions"]]
    # v2, the champion the fixture promoted, on the backend the server runs (auto: the fastest measured at start)
    backend = requests.get(server + "/metadata", timeout=30).json()["backend"]
    champion = export.use_backend(SiameseRegressor.load(_folder(c, "champion", work)), backend,
                                  _folder(c, "champion", work))
    expected = champion.encode(sentences, show_progress=False)
    assert torch.allclose(torch.tensor(vectors), expected.float(), atol=1e-4)
    both = _post(server, {"dataframe_records": [{"sentence": "a", "sentence1": "b", "sentence2": "c"}]})
    assert both.status_code == 400 and "not both" in both.json()["message"]


def test_served_model_answers_and_rejects_bad_payloads(server):
    ok = _post(server, {"dataframe_records": [{"sentence1": "a man plays guitar", "sentence2": "a woman plays music"}]})
    assert ok.status_code == 200, ok.text
    pred = ok.json()["predictions"]
    assert len(pred) == 1 and set(pred[0]) == {"cosine", "score"} and -1 <= pred[0]["cosine"] <= 1

    missing = _post(server, {"dataframe_records": [{"sentence1": "a man plays guitar"}]})
    assert missing.status_code == 400 and "sentence2" in missing.text
    wrong_type = _post(server, {"dataframe_split": {"columns": ["sentence1", "sentence2"], "data": [[1, 2]]}})
    assert wrong_type.status_code == 400
    empty_text = _post(server, {"dataframe_records": [{"sentence1": "", "sentence2": "a dog"}]})
    assert empty_text.status_code == 400 and "non-empty strings" in empty_text.text
    empty = _post(server, {"dataframe_records": []})
    assert empty.status_code == 400 and empty.json()["message"]  # MLflow's schema check: an empty table is not scored
    not_json = requests.post(server + "/invocations", data="{", headers={"Content-Type": "application/json"},
                             timeout=30)
    assert not_json.status_code == 400

    big = [{"sentence1": f"a man plays guitar {i % 7}", "sentence2": "the dog runs in the park"} for i in range(10_000)]
    answer = _post(server, {"dataframe_records": big})
    assert answer.status_code == 200, answer.text[:500]
    assert len(answer.json()["predictions"]) == 10_000
    too_big = _post(server, {"dataframe_records": big * 3})
    assert too_big.status_code == 400 and "limit" in too_big.text


def _payloads() -> dict[str, tuple[bytes, str, str | int]]:
    """name -> (body, content type, expected: 'ok' (200, answer checked) or the exact 4xx status)."""
    js = "application/json"
    good = lambda rows: json.dumps({"dataframe_records": rows}).encode()  # noqa: E731
    return {
        "good1": (good([{"sentence1": "a man plays guitar", "sentence2": "a woman plays music"}]), js, "ok"),
        "good3": (good([{"sentence1": f"the dog runs in the park {i}", "sentence2": "a cat sleeps on the sofa"}
                        for i in range(3)]), js, "ok"),
        "unicode": (good([{"sentence1": "caf\u00e9 \u202eevil\u202c \U0001F600 e\u0301", "sentence2": "\u4e00\u4e8c "
                                                                                                      "\u0000 x"}]), js,
                                                                                                      "ok"),
        "split": (json.dumps({"dataframe_split": {"columns": ["sentence1", "sentence2"],
                                                  "data": [["a red car", "a blue car"]]}}).encode(), js, "ok"),
        "not_json": (b"{", js, 400),
        "deep_list": (b"[" * 50_000 + b"]" * 50_000, js, 400),
        "deep_dict": (b'{"a":' * 20_000 + b"1" + b"}" * 20_000, js, 400),
        "deep_unclosed": (b'{"dataframe_records": ' + b"[" * 100_000, js, 400),
        "missing_column": (good([{"sentence1": "a"}]), js, 400),
        "not_strings": (good([{"sentence1": 1, "sentence2": None}]), js, 400),
        "empty_sentence": (good([{"sentence1": " ", "sentence2": "b"}]), js, 400),
        "records_not_list": (json.dumps({"dataframe_records": 5}).encode(), js, 400),
        "unknown_key": (json.dumps({"rows": []}).encode(), js, 400),
        "json_scalar": (b"42", js, 400),
        "empty_body": (b"", js, 400),
        "csv_garbage": (b'"unclosed,\x00\xff\n', "text/csv", 400),
        "bad_utf8": (b'{"dataframe_records": [{"sentence1": "\xff\xfe", "sentence2": "b"}]}', js, 400),
        "no_content_type": (good([{"sentence1": "a", "sentence2": "b"}]), "", 415),
        "too_large": (b" " * (5 * 1024 * 1024), js, 413),
    }


def test_abuse_mixed_requests_from_threads_get_no_5xx_and_correct_answers(server):
    """Bounded loopback abuse: 1,200 mixed good and malformed requests from 6 threads."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    payloads = _payloads()

    def send(name):
        body, ctype, _ = payloads[name]
        headers = {"Content-Type": ctype} if ctype else {}
        r = requests.post(server + "/invocations", data=body, headers=headers, timeout=120)
        return name, r.status_code, r.text

    reference = {}
    for name, (_, _, expected) in payloads.items():
        _, status, text = send(name)
        assert status < 500, (name, status, text[:300])
        assert status == (200 if expected == "ok" else expected), (name, status, text[:300])
        if expected == "ok":
            reference[name] = json.loads(text)["predictions"]
        else:
            assert json.loads(text)["message"], name  # a reason, not an empty error
    rng = random.Random(0)
    names = [rng.choice(list(payloads)) for _ in range(1200)]
    names = [n for n in names if n != "too_large" or rng.random() < 0.1]  # a few 5 MB bodies, not hundreds
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(send, names))
    statuses = [s for _, s, _ in results]
    assert max(statuses) < 500, [(n, s, t[:200]) for n, s, t in results if s >= 500][:5]
    # a request is batched with whatever arrives beside it: equal to its answer alone within the backend's precision
    # (fp32: padding changes nothing; dynamic int8 quantises each batch's activations with that batch's range, bf16
    # rounds: ~1e-4 on a cosine)
    fp32 = requests.get(server + "/metadata", timeout=30).json()["precision"] == "fp32"
    tol = (1e-5, 1e-4) if fp32 else (2e-3, 1e-2)
    for name, status, text in results:
        if payloads[name][2] == "ok":
            got = json.loads(text)["predictions"]
            assert status == 200 and len(got) == len(reference[name])
            for a, b in zip(got, reference[name]):
                assert a["cosine"] == pytest.approx(b["cosine"], abs=tol[0]) and a["score"] == pytest.approx(b["score"],
                                                                                                             abs=tol[1])
        else:
            assert status == payloads[name][2], (name, status)
    assert requests.get(server + "/ping", timeout=10).status_code == 200  # still up


def test_the_registered_model_carries_its_model_card(registry):
    """README.md in sentence-transformers' card style: written beside the version file, at the logged pyfunc's root,
    beside its weights, and as the version's description; its numbers are the evaluation's."""
    import mlflow

    work, uri, decisions, c = registry
    ev, reg = decisions[2]["eval"], decisions[2]["register"]
    card = (work / "model_card.md").read_text()
    assert card.startswith("---\nbase_model: ") and "library_name: sentence-transformers" in card
    assert (
        f"avg7 {ev['avg7_spearman']:.2f} Spearman [{ev['avg7_spearman_low']:.2f}, {ev['avg7_spearman_high']:.2f}]"
        in card
    )
    assert (work / "eval2/table.md").read_text().strip() in card
    assert "## Usage" in card and "## Training" in card and "## Intended use and limitations" in card
    # what `stsreg serve` runs in
    assert "| Serving precision (`serve.precision`) | `auto`: fp32 on a CPU" in card
    assert "(STS-B train + SICK-R train, labels" in card  # the training tables, from stage2.train_tables
    local = mlflow.artifacts.download_artifacts(f"runs:/{reg['run_id']}/model", tracking_uri=uri,
                                                dst_path=str(work / "dl"))
    weights = [p.parent for p in (work / "dl/model/artifacts").glob("*/modules.json")]
    assert len(weights) == 1 and (weights[0] / "README.md").read_text() == card
    assert (work / "dl/model/README.md").read_text() == card and local.endswith("model")
    assert "## Evaluation" in c.get_model_version(NAME, str(reg["version"])).description


def test_register_and_promote_each_leave_a_timed_run(registry):
    """`stsreg report`'s time to a champion covers every step: register and promote have their own MLflow runs with
    wall_seconds and precision; promote records the gate (and the backbone's evaluation precision when it ran one)."""
    _, _, decisions, c = registry
    exp = c.get_experiment_by_name("stsreg")
    runs = {name: c.search_runs([exp.experiment_id], f"attributes.run_name = '{name}'",
                                order_by=["attributes.start_time ASC"])
            for name in ("register", "promote")}
    assert len(runs["register"]) == len(runs["promote"]) == 3
    for run in runs["register"] + runs["promote"]:
        assert run.info.status == "FINISHED" and run.data.metrics["wall_seconds"] > 0
    assert {r.data.tags["precision"] for r in runs["register"]} == {"fp32"}  # the exports are scored in fp32
    for i, run in enumerate(runs["promote"]):
        decision = decisions[i]["promote"]
        # no champion yet: the backbone was evaluated; else the champion's predictions come from the registry
        assert run.data.tags["precision"] == ("none" if decision["champion"] else decisions[i]["eval"]["precision"])
        assert run.data.metrics["promoted"] == float(decision["promoted"])
        assert run.data.metrics["gain_p_value"] == pytest.approx(decision["test"]["p_value"])
    assert [d["promote"]["champion"] is None for d in decisions.values()] == [True, True, False]  # both branches ran


def test_promote_by_hand_in_a_clean_shell_rescores_the_champion_from_the_projects_store(registry):
    """The documented by-hand gate, typed in a shell with no MLFLOW_* / PREFECT_* variable: the test tables changed
    since the champion was scored (new STS12 pairs), so its stored predictions miss pairs and `stsreg promote` re-scores
    it, downloading it from the project's own store (no stray ./mlflow.db), and gates on [avg7, sts12], each metric
    with the pairs it compared. A gate that fails marks the decision files failed instead of leaving the last one."""
    work, _, _, c = registry
    table = tiny_eval_table()
    extra = tiny_sts(12, seed=77).assign(dataset="sts12", split="test", subset="C", file="sts12/new.txt",
                                         line=range(1, 13), seen_in_train=False)
    (work / "data/prepared").mkdir(parents=True, exist_ok=True)
    today = work / "data/prepared/sts.parquet"
    pd.concat([table, extra], ignore_index=True).to_parquet(today)
    # the retrain's challenger, evaluated and registered on today's tables (the champion was scored before them)
    from pipelines.product.release_flow import evaluate_flow, register_flow

    evaluate_flow(params_path=str(work / "params.yaml"), model_dir=str(work / "untrained"), sts_path=str(today),
                  out_dir=str(work / "eval_today"), headline_path=str(work / "eval_today.json"))
    register_flow(params_path=str(work / "params.yaml"), model_dir=str(work / "untrained"),
                  eval_dir=str(work / "eval_today"),
                  data_paths=(str(today), str(work / "nli.parquet")), out_path=str(work / "reg_today.json"),
                  sts_path=str(today))
    raw = yaml.safe_load((work / "params.yaml").read_text())
    raw["promote"]["metrics"] = ["avg7", "sts12"]
    (work / "params_gate.yaml").write_text(yaml.safe_dump(raw))
    stsreg = os.path.join(os.path.dirname(sys.executable), "stsreg")
    done = subprocess.run([stsreg, "promote", "--params", "params_gate.yaml", "--out", "gate.json", "--headline",
                           "gate_head.json"], cwd=work, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (work / "mlflow.db").exists() and not (work / "mlruns").exists()
    decision = json.loads((work / "gate.json").read_text())
    assert "re-scored on today's test tables" in decision["reason"] and not decision["promoted"]
    assert "the 12 pairs its stored predictions lacked scored" in decision["reason"]  # not all 432 again
    tests = decision["tests"]
    assert set(tests) == {"avg7", "sts12"}
    assert tests["sts12"]["pairs"] == 60 + 12 and tests["avg7"]["pairs"] == 7 * 60 + 12
    assert "72 pairs" in decision["reason"]
    run = c.search_runs([c.get_experiment_by_name("stsreg").experiment_id], "attributes.run_name = 'promote'",
                        order_by=["attributes.start_time DESC"], max_results=1)[0]
    assert run.data.metrics["gain_sts12_pairs"] == 72 and "gain_avg7_p_value" in run.data.metrics
    # a gate that cannot decide (the champion cannot be re-scored: its model files are gone) leaves no stale decision
    champion = c.get_model_version_by_alias("sts-regression", "champion")
    files = Path(urllib.parse.urlparse(c.get_run(champion.run_id).info.artifact_uri).path) / "model"
    files.rename(files.with_name("model.away"))
    try:
        failed = subprocess.run([stsreg, "promote", "--params", "params_gate.yaml", "--out", "gate.json",
                                 "--headline", "gate_head.json"], cwd=work, env=clean_env(), capture_output=True,
                                text=True, timeout=600)
    finally:
        files.with_name("model.away").rename(files)
    assert failed.returncode != 0
    for name in ("gate.json", "gate_head.json"):
        marked = json.loads((work / name).read_text())
        assert marked["status"] == "failed" and marked["promoted"] is False and marked["error"]


def test_the_openai_client_gets_the_served_embeddings(server, registry):
    """OpenAI's embeddings API, called with the official client as LangChain / LlamaIndex call it: the vectors are the
    champion's (equal to /invocations' sentence rows), float and base64 alike, with usage; `dimensions` other than
    the model's is refused clearly."""
    import base64

    import numpy as np
    import openai

    client = openai.OpenAI(base_url=server + "/v1", api_key="unused")
    sentences = ["a man plays guitar", "a woman plays music", "the dog runs in the park"]
    got = client.embeddings.create(model="sts-regression", input=sentences)
    assert [d.index for d in got.data] == [0, 1, 2] and got.model == "sts-regression"
    assert got.usage.prompt_tokens > len(sentences) and got.usage.total_tokens == got.usage.prompt_tokens
    rows = _post(server, {"dataframe_records": [{"sentence": s} for s in sentences]}).json()["predictions"]
    np.testing.assert_allclose([d.embedding for d in got.data], [r["embedding"] for r in rows], atol=1e-5)  # same batch
    one = client.embeddings.create(model="m", input="a man plays guitar")
    # alone vs in a batch of 3: equal within the backend's precision (dynamic int8 quantises each batch with its range)
    fp32 = requests.get(server + "/metadata", timeout=30).json()["precision"] == "fp32"
    a, b = np.asarray(one.data[0].embedding), np.asarray(got.data[0].embedding)
    if fp32:
        np.testing.assert_allclose(a, b, atol=1e-5)
    else:
        assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) > 0.999
    raw = requests.post(server + "/v1/embeddings", json={"input": sentences, "encoding_format": "base64"},
                        timeout=60).json()
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in raw["data"]]
    # the JSON numbers are the float32 values themselves (each written as its float64's shortest round trip)
    np.testing.assert_array_equal(decoded, np.asarray([d.embedding for d in got.data], dtype=np.float32))
    with pytest.raises(openai.BadRequestError, match="does not shorten them"):
        client.embeddings.create(model="m", input="x", dimensions=8)
    with pytest.raises(openai.BadRequestError, match=r"input\[1\] must hold non-empty strings"):
        client.embeddings.create(model="m", input=["x", ""])


def test_similarity_ready_and_prometheus_metrics(server):
    pairs = {"sentence1": ["a man plays guitar", "the dog runs"], "sentence2": ["a woman plays music", "a cat sleeps"]}
    sim = requests.post(server + "/similarity", json=pairs, timeout=60).json()
    rows = _post(server, {"dataframe_records": [{"sentence1": a, "sentence2": b}
                                                for a, b in zip(*pairs.values())]}).json()
    assert sim["cosine"] == pytest.approx([r["cosine"] for r in rows["predictions"]], abs=1e-6)
    assert sim["score"] == pytest.approx([r["score"] for r in rows["predictions"]], abs=1e-6) and sim["scale"] == [0.0,
                                                                                                                   5.0]
    ready = requests.get(server + "/ready", timeout=10)
    assert ready.status_code == 200 and ready.json()["ready"] is True and ready.json()["version"] == "2"
    assert requests.get(server + "/health", timeout=10).status_code == 200
    bad = requests.post(server + "/similarity", json={"sentence1": "a"}, timeout=10)
    assert bad.status_code == 400 and set(bad.json()) == {"error_code", "message"}
    nowhere = requests.post(server + "/nowhere", json={}, timeout=10)
    assert nowhere.status_code == 404 and nowhere.json()["error_code"] == "NOT_FOUND"
    text = requests.get(server + "/metrics", timeout=10).text
    for name in ('stsreg_requests_total{endpoint="/similarity",status="200"}',
                 'stsreg_requests_total{endpoint="/similarity",status="400"}',
                 "stsreg_request_seconds_bucket", "stsreg_batch_sentences_count", "stsreg_queue_wait_seconds_count",
                 'stsreg_served_info{backend=', 'version="2"', "stsreg_ready 1.0", 'endpoint="other",status="404"'):
        assert name in text, name


def test_the_served_model_follows_its_alias_under_load_and_a_pinned_version_never_moves(registry):
    """A server started on an alias polls it (--follow-s 1): v2 served under load, the alias moved to v1, every request
    answered 200 throughout and the answers, /metadata and /metrics are v1's within seconds."""
    import threading

    from stsreg.product.serving.served import Follower
    from stsreg.product.serving.server_config import Compute

    work, uri, _, c = registry
    c.set_registered_model_alias(NAME, "live", "2")
    port = free_port()
    log = work / "serve-follow.log"
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "stsreg"), "serve", "--model-uri",
                             f"models:/{NAME}@live", "--port", str(port), "--follow-s", "1", "--backend", "torch",
                             "--precision", "fp32"], cwd=work, env=clean_env(), stdout=open(log, "w"),
                             stderr=subprocess.STDOUT)
    url, statuses, stop = f"http://127.0.0.1:{port}", [], threading.Event()
    pair = {"dataframe_records": [{"sentence1": "a man plays guitar", "sentence2": "a woman plays music"}]}
    try:
        _wait_answering(url + "/ready", proc, log)
        before = _post(url, pair).json()["predictions"][0]["cosine"]
        assert requests.get(url + "/metadata", timeout=10).json()["version"] == "2"

        def load():
            while not stop.is_set():
                statuses.append(_post(url, pair).status_code)

        threads = [threading.Thread(target=load) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(2)
        c.set_registered_model_alias(NAME, "live", "1")
        moved = time.time()
        while requests.get(url + "/metadata", timeout=10).json().get("version") != "1":
            assert time.time() - moved < 90, log.read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(2)  # requests keep arriving after the swap
        stop.set()
        for t in threads:
            t.join()
        after = _post(url, pair).json()["predictions"][0]["cosine"]
        assert statuses and set(statuses) == {200}, sorted(set(statuses))
        assert abs(after - before) > 1e-4  # v1 (untrained) answers otherwise than v2 (trained)
        assert 'version="1"' in requests.get(url + "/metrics", timeout=10).text
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    # a backend given by flag is loaded as given (no start-up measurement of the others), and MLflow's advice to
    # the pyfunc's author is not a line of the served log
    assert "backend auto:" not in text and "Add type hints" not in text, text[-3000:]
    pinned = Follower(f"models:/{NAME}/2", uri, Compute(), 0.1, lambda: "2",
                      lambda new: pytest.fail("a pinned version moved"))
    assert not pinned.check() and not pinned.start().thread.is_alive()
    from stsreg.product.serving.model_uri import resolve
    from stsreg.product.serving.serve import build_app
    from stsreg.product.serving.server_config import Compute, ServerConfig

    app = build_app(ServerConfig(artifact_uri=resolve(f"models:/{NAME}/2", uri), tracking_uri=uri,
                                 model_uri=f"models:/{NAME}/2", compute=Compute(backend="torch")))
    assert json.loads(app.metadata)["version"] == "2"  # a pinned version says which it is


def test_a_request_sent_while_the_model_loads_waits_for_it(registry):
    """`make serve` then the README's curl at once: the server is live before its model is loaded (/ready 503), and a
    request that arrives meanwhile waits for the model instead of being refused."""
    from starlette.testclient import TestClient

    from stsreg.product.serving.model_uri import resolve
    from stsreg.product.serving.serve import build_app
    from stsreg.product.serving.server_config import Compute, ServerConfig

    _, uri, _, _ = registry
    app = build_app(ServerConfig(artifact_uri=resolve(f"models:/{NAME}/2", uri), tracking_uri=uri,
                                 compute=Compute(backend="torch", precision="fp32")), lazy=True)
    client = TestClient(app)
    ready_at_start = client.get("/ready").status_code
    answer = client.post("/invocations", json={"dataframe_records": [{"sentence1": "a man plays guitar",
                                                                      "sentence2": "a woman plays music"}]})
    assert answer.status_code == 200, answer.text
    assert set(answer.json()["predictions"][0]) == {"cosine", "score"}
    assert ready_at_start == 503 and client.get("/ready").status_code == 200


def _requests_answered(url: str) -> float:
    """The replica's count of answered /invocations requests, read from its Prometheus /metrics."""
    lines = requests.get(url + "/metrics", timeout=10).text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines
               if line.startswith("stsreg_requests_total{") and 'endpoint="/invocations"' in line)


def test_replicas_behind_a_load_balancer_as_the_recipe_says(registry, tmp_path):
    """deploy/Caddyfile as written: two `stsreg serve` replicas behind Caddy, health-checked on GET /ready: every
    request through the balancer answered, both replicas used, and with one replica stopped every request still
    answered by the other."""
    work, _, _, _ = registry
    caddy = os.path.join(os.path.dirname(sys.executable), "caddy")
    ports, procs = [free_port(), free_port()], []
    lb_port = free_port()
    try:
        for port in ports:
            log = work / f"replica-{port}.log"
            procs.append(subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "stsreg"), "serve",
                                           "--model-uri",
                                           f"models:/{NAME}/2", "--port", str(port), "--backend", "torch",
                                           "--precision",
                                           "fp32"], cwd=work, env=clean_env(), stdout=open(log, "w"),
                                           stderr=subprocess.STDOUT))
        for port, proc in zip(ports, procs):
            _wait_answering(f"http://127.0.0.1:{port}/ready", proc, work / f"replica-{port}.log")
        env = {**clean_env(), "STSREG_REPLICAS": " ".join(f"127.0.0.1:{p}" for p in ports),
               "STSREG_LB_PORT": str(lb_port),
               "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
        lb_log = tmp_path / "caddy.log"
        procs.append(subprocess.Popen([caddy, "run", "--config", str(REPO / "deploy/Caddyfile"), "--adapter",
                                       "caddyfile"],
                                      env=env, stdout=open(lb_log, "w"), stderr=subprocess.STDOUT))
        lb = f"http://127.0.0.1:{lb_port}"
        _wait_answering(lb + "/ready", procs[-1], lb_log, timeout=60)
        pair = {"dataframe_records": [{"sentence1": "a man plays guitar", "sentence2": "a woman plays music"}]}
        answers = [_post(lb, pair) for _ in range(20)]
        assert {r.status_code for r in answers} == {200}
        assert len({json.dumps(r.json()) for r in answers}) == 1  # the same version answers alike on each replica
        assert all(_requests_answered(f"http://127.0.0.1:{p}") >= 1 for p in ports)  # round robin used both
        procs[0].terminate()
        procs[0].wait(timeout=30)
        after = [_post(lb, pair) for _ in range(20)]
        assert {r.status_code for r in after} == {200}, [r.text[:200] for r in after if r.status_code != 200][:3]
        # a pinned version is looked up in the project's store, not MLflow's default
        assert not (work / "mlflow.db").exists()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


@pytest.mark.parametrize("path", ["/v1/embeddings", "/similarity"])
def test_abuse_guarantees_hold_on_every_endpoint(server, path):
    """The guarantees of /invocations on the other POST endpoints: malformed bodies get a 4xx in the one error shape
    (a reason, no trace, no path), oversized ones 413, no Content-Type 415, never a 5xx."""
    js = {"Content-Type": "application/json"}
    cases = [(b"{", js, 400), (b"", js, 400), (b"42", js, 400), (b"[" * 50_000 + b"]" * 50_000, js, 400),
             (b'{"input": null, "sentence1": null}', js, 400), (b'{"input": ["\xff"], "sentence1": "\xff"}', js, 400),
             (b'{"input": [1, 2], "sentence1": [1], "sentence2": [2]}', js, 400), (b'{"input": "a"}', {}, 415),
             (b" " * (5 * 1024 * 1024), js, 413)]
    for body, headers, status in cases:
        r = requests.post(server + path, data=body, headers=headers, timeout=60)
        assert r.status_code == status, (path, body[:40], r.status_code, r.text[:200])
        err = r.json()
        assert set(err) == {"error_code", "message"} and err["message"] and "Traceback" not in r.text
        assert "/work" not in r.text and ".py" not in r.text


def test_register_typed_again_on_the_same_evaluation_returns_its_version(registry):
    """`stsreg register` run twice by hand on one evaluation used to end in MLflow's "Path ... already exists"
    traceback; the evaluation's version is returned again, alias challenger on it, no second copy."""
    from pipelines.product.release_flow import register_flow

    work, _, decisions, c = registry
    before = len(c.search_model_versions(f"name = '{NAME}'"))
    again = register_flow(params_path=str(work / "params.yaml"), model_dir=str(work / "untrained"),
                          eval_dir=str(work / "eval2"), data_paths=(str(work / "sts.parquet"),
                                                                    str(work / "nli.parquet")),
                          out_path=str(work / "reg2-again.json"), sts_path=str(work / "sts.parquet"))
    assert again["version"] == decisions[2]["register"]["version"] == 3
    assert len(c.search_model_versions(f"name = '{NAME}'")) == before
    assert int(c.get_model_version_by_alias(NAME, "challenger").version) == 3


def test_the_champion_is_set_back_by_hand_in_a_clean_shell(registry):
    """A rollback after a bad promotion: `stsreg champion set VERSION --reason ...` typed in a shell with no MLFLOW_*
    variable moves the alias in the project's own store without the gate, and the move is on the version's tags; a
    missing reason or a version the store lacks is refused (exit 2) and moves nothing."""
    work, _, _, c = registry
    stsreg = os.path.join(os.path.dirname(sys.executable), "stsreg")

    def run(*argv):
        return subprocess.run([stsreg, "champion", *argv], cwd=work, env=clean_env(), capture_output=True, text=True,
                              timeout=300)

    def champion() -> str:
        return str(c.get_model_version_by_alias(NAME, "champion").version)

    before = champion()
    target = "1" if before != "1" else "2"
    for refused in (run("set", target), run("set", "99", "--reason", "no such version")):
        assert refused.returncode == 2 and champion() == before
    assert "needs the VERSION and a --reason" in run("set", target).stderr
    assert "has no version 99" in run("set", "99", "--reason", "x").stderr
    done = run("set", target, "--reason", "v2 regressed on our support tickets")
    assert done.returncode == 0, done.stderr[-2000:]
    try:
        assert champion() == target
        tag = c.get_model_version(NAME, target).tags["champion.set_by_hand"]
        assert f"from v{before}; v2 regressed on our support tickets" in tag
        shown = run("show")
        assert shown.returncode == 0 and f"champion: v{target}" in shown.stdout
        assert f"  v{target}: avg7 " in shown.stdout and "set by hand" in shown.stdout
        # rollback: back to the latest earlier version that was promoted or set by hand
        if target == "1":
            refused = run("rollback", "--reason", "nothing before v1")
            assert refused.returncode == 2 and "no champion before v1" in refused.stderr
        assert run("set", before, "--reason", "back to the gate's choice").returncode == 0
        back = run("rollback", "--reason", f"v{before} again was wrong")
        assert back.returncode == 0, back.stderr[-2000:]
        assert champion() == target and f"was {before}" in back.stdout
    finally:
        c.set_registered_model_alias(NAME, "champion", before)  # the module's other tests serve the gate's champion


def test_the_served_models_openapi_contract_holds_under_schemathesis(server):
    """The registered model served as a user serves it: schemathesis generates requests for every operation of
    /openapi.json on loopback; no 5xx, every status, content type and body as described."""
    from tests.helpers.contract import check_contract

    assert check_contract(server, examples=20) == []
