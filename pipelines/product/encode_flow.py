"""Batch embedding on Prefect workers: ``stsreg-encode`` cuts a corpus into chunks
(:mod:`stsreg.product.serving.batch_encode`) and hands groups of them to ``stsreg-encode-chunks`` flow runs on a work
pool; the workers share the output's parts folder (one machine, or a shared mount), the parent assembles the output once
every chunk is there.

- ``stsreg-encode``: prepares the job here (reads the corpus, resolves ``auto`` to one backend so that every worker
  computes alike, writes the manifest), starts one chunk flow run per group through the deployment
  ``stsreg-encode-chunks/pool`` (``stsreg deploy`` creates it on ``schedule.work_pool``), waits for them, assembles.
  Chunks a failed or killed run left missing are encoded by the next run; finished ones are never redone.
- ``stsreg-encode-chunks``: attaches to the prepared job (its manifest must match) and encodes the chunks it is
  given that are still missing, recording which worker did each (``STSREG_WORKER_NAME``, else the host and process).

Without a deployment (``deployment=None``) the groups run one after the other in this process.

    python -m pipelines.product.encode_flow corpus.parquet --out embeddings.parquet --groups 4
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
import socket
from pathlib import Path

from prefect import flow

from stsreg.product.serving import batch_encode

DEPLOYMENT = "stsreg-encode-chunks/pool"


@flow(name="stsreg-encode-chunks")
def encode_chunks_flow(spec: batch_encode.EncodeSpec, chunks: list[int], project_dir: str = ".") -> dict:
    """Encode ``chunks`` of the job prepared for ``spec.out`` (absolute paths, or relative to ``project_dir``)."""
    os.chdir(project_dir)
    job = batch_encode.Job.load(spec)
    job.attach()
    worker = os.environ.get("STSREG_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}"
    encoded = []
    for i in chunks:
        if not job.chunk_path(i).is_file():
            job.run_chunk(i)
            job.chunk_path(i).with_suffix(".by").write_text(worker)
            encoded.append(i)
    return {"worker": worker, "encoded": encoded}


@flow(name="stsreg-encode")
def encode_flow(spec: batch_encode.EncodeSpec, groups: int = 2, deployment: str | None = DEPLOYMENT,
                timeout_s: float = 24 * 3600) -> dict:
    """Prepare ``spec``'s job, fan the missing chunks out in ``groups`` flow runs of ``deployment`` (None: here, one
    after another), wait, assemble; returns the summary of :func:`stsreg.product.serving.batch_encode.encode_corpus`
    plus ``workers`` (who encoded how many chunks)."""
    from prefect.deployments import run_deployment
    from prefect.flow_runs import wait_for_flow_run
    from prefect.utilities.asyncutils import run_coro_as_sync

    spec = spec.model_copy(update={"corpus": str(Path(spec.corpus).resolve()), "out": str(Path(spec.out).resolve())})
    job = batch_encode.Job.load(spec)
    todo = job.prepare()
    shared = spec.model_copy(update={"backend": job.manifest.backend})  # every worker runs the one resolved here
    here = os.getcwd()
    batches = [todo[g::groups] for g in range(groups) if todo[g::groups]]
    if deployment is None:
        for chunks in batches:
            encode_chunks_flow(shared, chunks, here)
    else:
        runs = [run_deployment(deployment, parameters={"spec": shared.model_dump(), "chunks": chunks,
                                                       "project_dir": here}, timeout=0) for chunks in batches]
        states = [run_coro_as_sync(wait_for_flow_run(r.id, timeout=timeout_s)).state for r in runs]
        failed = [f"{r.name}: {s.name}" for r, s in zip(runs, states) if not s.is_completed()]
        if failed:
            raise RuntimeError(f"chunk flow runs did not complete ({', '.join(failed)}); rerun to encode what is "
                               f"missing")
    workers = Counter(by.read_text() for by in job.parts.glob("chunk-*.by"))  # read before assemble removes the parts
    job.assemble()
    job.write_rejects()
    return {**job.summary(job.n_chunks - len(todo)), "workers": dict(workers)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Embed a corpus on Prefect workers (the stsreg-encode flow).")
    ap.add_argument("corpus")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="models:/sts-regression@champion")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--column", default=None)
    ap.add_argument("--chunk-size", type=int, default=10_000)
    ap.add_argument("--groups", type=int, default=2, help="chunk flow runs (at most this many workers share the work)")
    ap.add_argument("--local", action="store_true", help="run the groups in this process (no deployment)")
    a = ap.parse_args()
    spec = batch_encode.EncodeSpec(corpus=a.corpus, out=a.out, model=a.model, backend=a.backend, column=a.column,
                                   chunk_size=a.chunk_size)
    print(encode_flow(spec, groups=a.groups, deployment=None if a.local else DEPLOYMENT))
