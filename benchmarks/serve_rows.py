"""The servers of ``make bench-serve`` (:mod:`benchmarks.serve_load`): how each is started, asked whether it is ready
and sent one STS pair per request.

Every embedding server gets the same OpenAI request, ``POST /v1/embeddings {"model", "input": [sentence1,
sentence2]}``: ``stsreg serve`` (each backend the version may serve, and ``auto``) and Infinity (``infinity-emb``, the
best embedding server that runs here: its torch engine on the champion's folder, its optimum engine on the champion's
own fp32 and int8 ONNX exports). ``mlflow models serve`` answers MLflow's ``/invocations`` (the pair as a dataframe
record), the sentence-transformers + FastAPI server its own ``/similarity``.

Infinity runs from its own virtual environment (:data:`INFINITY_VENV`, made by ``make bench-serve``:
``infinity-emb[server,optimum,torch]`` with the project's torch), given the same threads. Its only set-up is the ONNX
file's name: its optimum engine loads ``model_quantized.onnx`` (preferred on a CPU) or ``model.onnx`` from the top of
the folder it is started in, so each optimum row gets a folder of links to the champion's files with one export under
that name; and the model's pooling (mean), which its optimum engine does not read from the folder. Infinity
optimises the graph at start with optimum's ``ORTOptimizer``; with the optimum that installs
beside torch 2.13 (2.x) that call fails and it serves the export as it is (its log says so): what a user gets.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from benchmarks.serve_drive import drive

MODEL_URI = "models:/sts-regression@champion"
INFINITY_VENV = Path("build/infinity-venv")
#: Infinity's optimum rows: row name -> (the champion's export, the name Infinity loads it by).
INFINITY_ONNX = {"Infinity optimum fp32": ("onnx/model.onnx", "model.onnx"),
                 "Infinity optimum int8": ("onnx/model_qint8.onnx", "model_quantized.onnx")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def served(name: str, cmd: list[str], ready: str, log: Path, cwd: Path | None = None, env: dict | None = None,
           cpus: set[int] | None = None, timeout_s: float = 300):
    """``cmd`` (``{port}`` filled in with a free port; its output in ``log``; on ``cpus`` where given) running while
    the block does; yields its URL once ``ready`` answers. Stopped after: SIGTERM, then its whole process group killed
    when it has not ended within 30 s (a server still working through a flood's queue may not stop when asked)."""
    from stsreg.infra.local_servers import wait_healthy

    port = free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([c.replace("{port}", str(port)) for c in cmd], cwd=cwd, env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url + ready, lambda: proc.poll() is None, name, log, timeout_s)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def server_row(name: str, cmd: list[str], ready: str, path: str, body, a, work: Path, cwd: Path | None = None) -> dict:
    """Start ``cmd`` (``{port}`` filled in), wait for ``ready``, drive ``path`` with every (set, clients) cell
    (:func:`benchmarks.serve_drive.drive`; ``body(pair, model)`` builds a request), stop it. The row: name, what it
    computes (``/metadata`` where the server has one) and the cells."""
    from stsreg.infra.tracking import tracking_uri

    log = (work / f"serve-{name.replace(' ', '_')}.log").resolve()
    # every server reads the project's own store (mlflow's CLI would otherwise open ./mlflow.db, an empty one); the
    # same threads for all; Infinity's optimised graphs (when it makes them) stay in the benchmark's folder
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads),
           "MLFLOW_TRACKING_URI": tracking_uri(Path(".").resolve()),
           "HF_HUB_CACHE": str(((cwd or work) / ".hf").resolve()),
           "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}
    with served(name, cmd, ready, log, cwd, env) as url:
        meta = _get(url + "/metadata")
        model = next((m["id"] for m in _get(url + "/v1/models").get("data", [])), "champion")
        print(f"{name}: {meta.get('backend', '')} {meta.get('precision', '')}", flush=True)
        row = {"name": name, "computes": {k: meta[k] for k in ("backend", "precision") if k in meta},
               **({"auto": meta["auto"]} if "auto" in meta else {}),
               "cells": drive(url + path, lambda p: body(p, model), a.sets, a.seconds, work,
                              metrics=url if name.startswith("stsreg serve") else None)}
        if path == "/v1/embeddings":  # what it computed, the same requests for every embedding server
            from benchmarks.serve_quality import measure

            row["quality"] = measure(url + path, model, a.sets["short"][:a.quality_pairs], a.gold[:a.quality_pairs])
        return row


def infinity_folder(folder: Path, export: str, as_name: str, into: Path) -> Path:
    """A folder of links to ``folder``'s files (its ``onnx/`` left out) with ``export`` linked at the top as
    ``as_name``: the layout Infinity's optimum engine reads."""
    into.mkdir(parents=True, exist_ok=True)
    for item in folder.iterdir():
        link = into / (as_name if item.name == "onnx" else item.name)
        target = (folder / export if item.name == "onnx" else item).resolve()
        if not link.is_symlink():
            link.symlink_to(target)
    return into


def infinity_command() -> list[str]:
    """Infinity's server on ``{port}``, OpenAI routes under ``/v1``, the model served as ``champion`` with the model's
    own pooling, said once: Infinity's optimum engine pools the first token unless told (its "auto"), which for a
    mean-pooled model serves other vectors (measured: STS-B test 88.95 against the model's 92.40). Add the engine and
    ``--model-id``."""
    return [str((INFINITY_VENV / "bin" / "infinity_emb").resolve()), "v2", "--device", "cpu", "--port", "{port}",
            "--url-prefix", "/v1", "--served-model-name", "champion", "--pooling-method", "mean"]


def _embeddings(pair, model: str) -> dict:
    return {"model": model, "input": [pair[0], pair[1]]}


def servers(a, folder: Path, backends: list[str], work: Path) -> list[tuple[str, object]]:
    """(name, measure) of every row: stsreg serve per backend and auto, Infinity's three, mlflow models serve, the
    sentence-transformers server."""
    stsreg = [sys.executable, "-m", "stsreg.cli", "serve", "--port", "{port}", "--threads", str(a.threads),
              "--follow-s", "0", "--backend"]
    rows = [(f"stsreg serve {b}", lambda b=b: server_row(f"stsreg serve {b}", stsreg + [b], "/ready",
                                                         "/v1/embeddings", _embeddings, a, work))
            for b in (*backends, "auto")]
    infinity = infinity_command()
    rows.append(("Infinity torch", lambda: server_row(
        "Infinity torch", infinity + ["--engine", "torch", "--model-id", str(folder.resolve())], "/health",
        "/v1/embeddings", _embeddings, a, work)))
    for name, (export, as_name) in INFINITY_ONNX.items():
        if (folder / export).is_file():
            here = infinity_folder(folder, export, as_name, work / name.replace(" ", "-"))
            rows.append((name, lambda name=name, here=here: server_row(
                name, infinity + ["--engine", "optimum", "--model-id", "."], "/health", "/v1/embeddings",
                _embeddings, a, work, cwd=here)))
    record = lambda p, _: {"dataframe_records": [{"sentence1": p[0], "sentence2": p[1]}]}  # noqa: E731
    rows.append(("mlflow models serve", lambda: server_row(
        "mlflow models serve", [sys.executable, "-m", "mlflow", "models", "serve", "-m", MODEL_URI, "--env-manager",
                                "local", "-h", "127.0.0.1", "-p", "{port}"], "/ping", "/invocations", record, a, work)))
    rows.append(("sentence-transformers + FastAPI", lambda: server_row(
        "sentence-transformers + FastAPI", [sys.executable, "-m", "benchmarks.st_server", str(folder), "{port}"],
        "/ping", "/similarity", lambda p, _: {"sentence1": p[0], "sentence2": p[1]}, a, work)))
    return rows
