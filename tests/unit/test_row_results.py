"""A row's results in git: the predictions it wrote come back bit for bit from the shared pairs and its scores, a
killed copy is not taken as done, and pairs files no row refers to are pruned."""

import json

import numpy as np
import pandas as pd

from stsreg.experiments import row_results
from stsreg.infra.codehash import RowKey

KEY = RowKey({"method": "ours", "seed": 1, "sts": "abc"}, ("stsreg.infra.atomic",))


def _work(tmp_path, name, seed):
    rng = np.random.default_rng(seed)
    work = tmp_path / "runs" / name
    work.mkdir(parents=True)
    pairs = pd.DataFrame({"task": ["sts12"] * 5, "file": ["f"] * 5, "line": range(5),
                          "sentence1": ["a, \"b\"", "c", "d\ne", "f", "g"], "sentence2": list("vwxyz"),
                          "score": [0.0, 1.5, 2.0, 4.2, 5.0], "seen_in_train": [True, False, False, True, False]})
    predictions = pairs.assign(cosine=rng.random(5).astype("float32"), prediction=rng.random(5).astype("float32"))
    predictions.to_parquet(work / "predictions.parquet")
    (work / "metrics.json").write_text(json.dumps({"avg7_spearman": float(seed)}))
    (work / "model.safetensors").write_bytes(b"weights")
    return work, predictions


def test_predictions_round_trip_and_the_pairs_are_kept_once(tmp_path):
    rows = row_results.folder(tmp_path / "out")
    for seed, name in enumerate(("ours-1", "mse-1")):
        work, predictions = _work(tmp_path, name, seed)
        assert not row_results.is_done(rows, name, KEY.fingerprint)
        row_results.keep(work, rows, name, KEY, "run-id")
        assert row_results.is_done(rows, name, KEY.fingerprint) and not row_results.is_done(rows, name, "other key")
        back = row_results.predictions(rows, name)
        assert back.equals(predictions) and list(back.dtypes) == list(predictions.dtypes)
        assert row_results.metrics(rows, name) == {"avg7_spearman": float(seed)}
        assert not (rows / name / "model.safetensors").exists()  # weights do not travel
    assert len(list(rows.glob("pairs-*.parquet"))) == 1
    assert row_results.prune(rows) == []


def test_a_killed_copy_is_not_done_and_unused_pairs_are_pruned(tmp_path):
    rows = row_results.folder(tmp_path / "out")
    work, _ = _work(tmp_path, "ours-1", 0)
    row_results.keep(work, rows, "ours-1", KEY, "run-id")
    (rows / "ours-1" / "run.json").unlink()  # as if killed before the marker
    assert not row_results.is_done(rows, "ours-1", KEY.fingerprint)
    assert [p.startswith("pairs-") for p in row_results.prune(rows)] == [True]


def test_a_row_without_predictions_keeps_its_marker(tmp_path):
    rows = row_results.folder(tmp_path / "out")
    work = tmp_path / "runs" / "gru"
    work.mkdir(parents=True)
    row_results.keep(work, rows, "gru", KEY, "run-id", unavailable="no GPU")
    assert row_results.read_json(rows, "gru", "run.json")["unavailable"] == "no GPU"
    assert row_results.metrics(rows, "gru") == {}


def test_recommit_rekeys_rows_to_todays_code_and_nothing_else(tmp_path):
    """After a change of shared code that golden proves equal, a row's key moves only by its code's hash: recommit
    writes the key its recorded parts and today's code make, so the row is found finished again; a row whose
    settings differ from today's stays unfinished for today's key."""
    rows = row_results.folder(tmp_path / "reports/compare")
    for seed, name in enumerate(("ours-1", "mse-1")):
        work, _ = _work(tmp_path, name, seed)
        row_results.keep(work, rows, name, KEY, "run-id")
    meta = rows / "ours-1" / "run.json"
    stale = {**json.loads(meta.read_text()), "fingerprint": "made-by-older-code"}
    meta.write_text(json.dumps(stale))  # what an edit of the runners' code does to a finished row's key
    assert not row_results.is_done(rows, "ours-1", KEY.fingerprint)
    assert row_results.recommit(tmp_path / "reports") == [str(meta)]
    assert row_results.is_done(rows, "ours-1", KEY.fingerprint) and row_results.recommit(tmp_path / "reports") == []
    other = RowKey({**KEY.parts, "seed": 2}, KEY.code)  # a setting changed: not a code change, retrained
    assert not row_results.is_done(rows, "ours-1", other.fingerprint)


def test_recommit_rekeys_a_measurement_kept_beside_the_rows(tmp_path):
    """A result kept in ``rows/`` with its key's parts and code (the baselines' retrieval cost) is re-keyed with the
    rows; a JSON file without them (a table's summary) is left as it is."""
    rows = row_results.folder(tmp_path / "reports/baselines")
    rows.mkdir(parents=True)
    cost = {"bi_pairs_per_s": 10.0, "fingerprint": "made-by-older-code", "parts": KEY.parts, "code": list(KEY.code)}
    (rows / "retrieval.json").write_text(json.dumps(cost))
    (rows / "other.json").write_text(json.dumps({"fingerprint": "x"}))
    assert row_results.recommit(tmp_path / "reports") == [str(rows / "retrieval.json")]
    kept = json.loads((rows / "retrieval.json").read_text())
    assert kept == {**cost, "fingerprint": KEY.fingerprint}
    assert json.loads((rows / "other.json").read_text()) == {"fingerprint": "x"}
