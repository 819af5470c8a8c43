"""Batch embedding on Prefect workers (slow): a Prefect server and two process workers on loopback share one corpus
through the `stsreg-encode` flow; each worker encodes chunks, the output equals one process's `stsreg encode`."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import TINY_WORDS, free_port
from tests.helpers.project import tiny_project

pytestmark = pytest.mark.slow


def test_two_workers_share_one_corpus(tiny_backbone, tmp_path, monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.product.deploy import deploy
    from pipelines.product.encode_flow import encode_flow
    from stsreg.infra import local_servers
    from stsreg.infra.config import ScheduleParams
    from stsreg.product.serving import batch_encode, export
    from stsreg.product.model import SiameseRegressor

    project = tiny_project(tmp_path, tiny_backbone)
    model_dir = project / "models/stage2"
    SiameseRegressor.from_pretrained(tiny_backbone, max_length=16).save(model_dir)
    export.export_all(model_dir)
    rng = random.Random(0)
    sentences = [" ".join(rng.choice(TINY_WORDS) for _ in range(rng.randint(3, 12))) for _ in range(3000)]
    (project / "corpus.txt").write_text("\n".join(sentences + sentences[:500]) + "\n")  # 500 repeated rows

    # one process: the reference
    model, backend, identity = batch_encode.load_model(str(model_dir), "onnx")
    spec = batch_encode.EncodeSpec(corpus=str(project / "corpus.txt"), out=str(tmp_path / "reference.npy"),
                                   chunk_size=250)
    reference = batch_encode.Job(spec, model, identity, backend)
    batch_encode.encode_corpus(reference, progress=False)

    urls = local_servers.start(project, free_port(), free_port(), worker=False, timeout=240, prefect_toml=False)
    workers = []
    try:
        for name in ("w1", "w2"):  # at most one flow run each, polling every 2 s: both get work
            env = {**os.environ, "PREFECT_API_URL": urls["prefect_api"], "STSREG_WORKER_NAME": name,
                   "PREFECT_WORKER_QUERY_SECONDS": "2"}
            workers.append(subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "prefect"), "worker",
                                             "start",
                                             "--pool", "stsreg-process", "--type", "process", "--limit", "1", "--name",
                                             name],
                                            env=env, cwd=project, stdout=open(tmp_path / f"{name}.log", "w"),
                                            stderr=subprocess.STDOUT))
        monkeypatch.chdir(project)
        with temporary_settings(updates={PREFECT_API_URL: urls["prefect_api"]}):
            assert "stsreg-encode-chunks/pool" in deploy(project, ScheduleParams())
            spec = batch_encode.EncodeSpec(corpus=str(project / "corpus.txt"), out=str(project / "emb.npy"),
                                           model=str(model_dir), backend="onnx", chunk_size=250)
            out = encode_flow(spec, groups=2, timeout_s=600)
    finally:
        for w in workers:
            w.terminate()
            w.wait(timeout=30)
        local_servers.stop(project)
    logs = "\n".join((tmp_path / f"{n}.log").read_text()[-1500:] for n in ("w1", "w2"))
    distinct = len(set(sentences))
    assert out["chunks"] == -(-distinct // 250) and out["unique"] == distinct and out["rows"] == 3500, (out, logs)
    assert set(out["workers"]) == {"w1", "w2"} and sum(out["workers"].values()) == out["chunks"], (out, logs)
    np.testing.assert_array_equal(np.load(project / "emb.npy"), np.load(tmp_path / "reference.npy"))
