"""Shared test fixtures. Tests never touch the network or a model hub."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ["STSREG_USE_SERVERS"] = "0"  # tests never log to a developer's running servers

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RAW = REPO / "tests" / "fixtures" / "raw"
SHARED_DATA = Path(os.environ.get("STSREG_SHARED_DATA", REPO.parent / "shared" / "data"))


#: MLflow's own default store (``./mlflow.db``, ``./mlruns``): what a client made without the project's URI writes into
#: the folder it runs in. The project's store is ``mlflow/mlflow.db``; nothing may create one of these at its root.
STRAY_STORES = ("mlflow.db", "mlruns")


@pytest.fixture(scope="session", autouse=True)
def no_stray_mlflow_store():
    """After the session, the repository holds no MLflow store outside ``mlflow/`` that it did not hold before: a test
    (or the code it runs) that used MLflow without the project's tracking URI fails the run here, naming the store."""
    before = {name for name in STRAY_STORES if (REPO / name).exists()}
    yield
    made = [name for name in STRAY_STORES if (REPO / name).exists() and name not in before]
    assert not made, (f"the test session created {made} at the repository root: something used MLflow without the "
                      "project's tracking URI (stsreg.infra.tracking.tracking_uri)")


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (servers started by tests bind to it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fixture_sources(raw: Path = FIXTURE_RAW) -> list[dict]:
    """A sources registry (``data/sources.json`` format) listing every file of a raw tree (default: the fixture
    tree) with its sha256 and size."""
    import hashlib

    files = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())
    return [{"dataset": "fixture", "file": f, "sha256": hashlib.sha256((raw / f).read_bytes()).hexdigest(),
             "bytes": (raw / f).stat().st_size, "url": ""} for f in files]


def fixture_registry(path: Path, raw: Path = FIXTURE_RAW) -> Path:
    """Write :func:`fixture_sources` of ``raw`` to ``path`` (the registry prepare checks the raw files against)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fixture_sources(raw)))
    return path


@pytest.fixture
def own_project(tmp_path: Path, monkeypatch) -> Path:
    """The working directory of a test that runs a stage command: the CLI takes the pipeline lock of the project in
    the cwd, so each such test is a project of its own and never waits for a pipeline running in this checkout."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def raw_tree(tmp_path: Path) -> Path:
    """A writable copy of the small fixture tree in every real raw format (with broken rows)."""
    dest = tmp_path / "raw"
    shutil.copytree(FIXTURE_RAW, dest)
    return dest


def replace_params(params, **sections):
    """``dataclasses.replace`` on nested sections: replace_params(p, prepare={"max_rejected_fraction": 1.0})."""
    changes = {}
    for name, values in sections.items():
        current = getattr(params, name)
        nested = {}
        for key, value in values.items():
            sub = getattr(current, key)
            nested[key] = (
                dataclasses.replace(sub, **value)
                if isinstance(value, dict) and dataclasses.is_dataclass(sub)
                else value
            )
        changes[name] = dataclasses.replace(current, **nested)
    return dataclasses.replace(params, **changes)


TINY_WORDS = ("a man woman dog cat is are plays playing guitar music runs running eats food the on sofa sleeps "
              "sleeping park in child ball red blue car drives fast slow happy sad").split()


@pytest.fixture(scope="session")
def tiny_backbone(tmp_path_factory) -> str:
    """A tiny randomly initialised BERT (2 layers, d=32) with a word-level vocab, saved as a local path."""
    from tests.helpers.backbones import tiny_backbone_of

    return tiny_backbone_of("bert", tmp_path_factory.mktemp("tiny-bert"), list(TINY_WORDS))


def tiny_sts(n: int, seed: int = 0):
    """n synthetic STS pairs from the tiny vocab. The vocab is split into two topics; a pair scores 4-5 when
    both sentences share a topic (no shared words needed) and 0-1 otherwise, so a random encoder starts near
    0 Spearman and training has something to learn."""
    import random

    import pandas as pd

    rng = random.Random(seed)
    half = len(TINY_WORDS) // 2
    topics = (TINY_WORDS[:half], TINY_WORDS[half:])
    rows = []
    for _ in range(n):
        ta, tb = rng.randint(0, 1), rng.randint(0, 1)
        a, b = rng.sample(topics[ta], 4), rng.sample(topics[tb], 4)
        score = (4.0 if ta == tb else 0.0) + rng.choice([0.0, 0.5, 1.0])
        rows.append({"sentence1": " ".join(a), "sentence2": " ".join(b), "score": score})
    return pd.DataFrame(rows)


def tiny_eval_table(per_task: int = 60, seed: int = 0):
    """An STS table shaped like data/prepared/sts.parquet with every evaluation task (7 test sets + STS-B dev),
    two subsets per task, synthetic tiny-vocab pairs, and every third pair marked as seen in training."""
    import pandas as pd

    from stsreg.product.data.catalogue import EVAL_TASKS

    parts = []
    for i, (dataset, split) in enumerate([(t, "test") for t in EVAL_TASKS] + [("stsb", "dev")]):
        d = tiny_sts(per_task, seed=seed + 100 * i)
        d = d.assign(dataset=dataset, split=split, subset=["A" if j % 2 else "B" for j in range(per_task)],
                     file=f"{dataset}/{split}.txt", line=range(1, per_task + 1),
                     seen_in_train=[j % 3 == 0 for j in range(per_task)])
        parts.append(d)
    return pd.concat(parts, ignore_index=True)


@pytest.fixture()
def tiny_sts_parquet(tmp_path):
    path = tmp_path / "sts.parquet"
    tiny_eval_table().to_parquet(path)
    return path
