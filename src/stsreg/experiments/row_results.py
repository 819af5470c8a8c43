"""A finished experiment row's results, kept in git beside the tables they make: ``<out>/rows/``.

The work folder of a row (``<out>/runs/<row>-<seed>/``: stage-1 models, checkpoints, weights while they train) is
heavy, ignored by git and re-made on demand. What the tables, the paired tests and the claims read is small and
travels with the repository::

    rows/<row>-<seed>/metrics.json           the evaluation (Spearman x100 per task, intervals)
    rows/<row>-<seed>/training_summary.json  a trained row's dev curve and kept checkpoint (nli_summary.json: NLI rows)
    rows/<row>-<seed>/scores.parquet         (n,) float32 ``cosine`` and ``prediction``, one per evaluation pair
    rows/pairs-<sha>.parquet                 those n pairs in order (task, file, line, text, gold score,
                                             seen_in_train), written once for every row scored on the same pairs
    rows/<row>-<seed>/run.json               written last: the fingerprint a rerun matches, the MLflow run, the pairs

A rerun reuses a row whose ``run.json`` still names its fingerprint (:class:`stsreg.infra.codehash.RowKey`: settings,
seed, data, code), with or without its work folder: a fresh clone rebuilds every table from these files without
training, and a row added to the settings is the only one that trains. ``run.json`` also keeps the key's parts and the
code's entry modules, so that a change of shared code that ``make golden`` proves equal re-keys the finished rows
(:func:`recommit`, ``make recommit``) instead of retraining them: the rows' counterpart of ``dvc commit``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

from stsreg.experiments import run_folders
from stsreg.infra import atomic
from stsreg.infra.codehash import RowKey

#: The per-pair columns a row adds to the shared pairs (the rest of ``predictions.parquet``).
SCORES = ["cosine", "prediction"]
#: The small files of a finished work folder that travel (those present are copied).
KEPT = ("metrics.json", "training_summary.json", "nli_summary.json", "fit_summary.json", "table.md")


def folder(out_dir: str | Path) -> Path:
    """``<out_dir>/rows``: where a table's rows keep their results."""
    return Path(out_dir) / "rows"


def is_done(rows: Path, name: str, fingerprint: str) -> bool:
    """True when ``rows/<name>`` holds the finished results of ``fingerprint``."""
    return run_folders.is_done(rows / name, fingerprint)


class Unavailable(Exception):
    """A row that cannot run here (e.g. a baseline's word2vec file, offline): it is kept saying why."""


def metrics(rows: Path, name: str) -> dict:
    """The evaluation of the finished row ``name`` (``<row>-<seed>``, or a baseline system's name)."""
    return read_json(rows, name, "metrics.json")


def outcome(rows: Path, name: str) -> dict:
    """What the finished row ``name`` gave: its evaluation, or ``{"unavailable": why}`` (:class:`Unavailable`)."""
    return metrics(rows, name) or {"unavailable": read_json(rows, name, "run.json")["unavailable"]}


def _pairs_key(pairs: pd.DataFrame) -> str:
    """A content key of the pairs table (columns, dtypes, values; not how parquet wrote it)."""
    h = hashlib.sha256(repr([(c, str(t)) for c, t in pairs.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(pairs, index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


def keep(work: Path, rows: Path, name: str, key: RowKey, mlflow_run_id: str, **extra) -> None:
    """Copy the finished run in ``work`` (its ``predictions.parquet`` when it scored pairs, and the :data:`KEPT`
    files present) to ``rows/<name>``: the pairs once per content, the scores per row, ``run.json`` (the key, its
    parts and code, ``extra``) last, so that a killed copy is never taken as done."""
    dest = rows / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if (work / "predictions.parquet").exists():
        predictions = pd.read_parquet(work / "predictions.parquet")
        pairs = predictions.drop(columns=SCORES)
        pairs_file = rows / f"pairs-{_pairs_key(pairs)}.parquet"
        if not pairs_file.exists():
            atomic.to_parquet(pairs, pairs_file)
        with atomic.replace_file(dest / "scores.parquet") as tmp:  # plain floats: 144 KB a row, not 219 KB
            predictions[SCORES].to_parquet(tmp, index=False, use_dictionary=False, compression="zstd")
        extra["pairs"] = pairs_file.name
    for fname in KEPT:
        if (work / fname).exists():
            shutil.copyfile(work / fname, dest / fname)
    run_folders.mark_done(dest, key.fingerprint, mlflow_run_id, parts=key.parts, code=list(key.code), **extra)


def read_json(rows: Path, name: str, fname: str) -> dict:
    """A JSON file of the row ``name`` ({} when it has none: an unavailable system has no metrics)."""
    return atomic.read_json(rows / name / fname)


def predictions(rows: Path, name: str) -> pd.DataFrame:
    """The row's ``predictions.parquet`` as its evaluation wrote it: the shared pairs with its scores appended."""
    meta = json.loads((rows / name / "run.json").read_text(encoding="utf-8"))
    pairs = pd.read_parquet(rows / meta["pairs"])
    scores = pd.read_parquet(rows / name / "scores.parquet")
    if len(scores) != len(pairs):
        raise ValueError(f"{rows / name}: {len(scores)} scores for {len(pairs)} pairs in {meta['pairs']}")
    return pairs.assign(**{c: scores[c].to_numpy() for c in SCORES})


def prune(rows: Path) -> list[str]:
    """Remove the pairs files no row folder in ``rows`` refers to (left when every row scored on them was rescored
    on changed data); returns the removed file names."""
    used = {atomic.read_json(m).get("pairs") for m in rows.glob("*/run.json")}
    gone = sorted(p.name for p in rows.glob("pairs-*.parquet") if p.name not in used)
    for fname in gone:
        (rows / fname).unlink()
    return gone


def recommit(root: Path) -> list[str]:
    """Re-key every finished row under ``root`` (``<root>/**/rows/<row>/run.json``, and a measurement kept beside the
    rows with its key's parts, such as the baselines' ``rows/retrieval.json``) to today's code: its parts as recorded,
    the code's hash as it is now. Run it only when ``make golden`` holds (``make recommit`` checks first): the code
    then computes what it computed for these rows. Returns the re-keyed files."""
    moved = []
    for meta_path in sorted([*Path(root).glob("**/rows/*/run.json"), *Path(root).glob("**/rows/*.json")]):
        meta = atomic.read_json(meta_path)
        if "parts" not in meta or "code" not in meta:
            continue  # a row kept before its parts were: retrained when its settings next run
        new = RowKey(meta["parts"], tuple(meta["code"])).fingerprint
        if new != meta["fingerprint"]:
            atomic.write_json(meta_path, {**meta, "fingerprint": new})
            moved.append(str(meta_path))
    return moved


if __name__ == "__main__":  # python -m stsreg.experiments.row_results reports   (make recommit)
    for path in recommit(Path(sys.argv[1] if len(sys.argv) > 1 else "reports")):
        print(f"re-keyed to today's code: {path}")
