"""The backends' shared machinery: write every declared backend's file into a model folder (:func:`export_all`), run a
loaded model on one (:func:`use_backend`), time them and choose for ``serve.backend: auto`` (:func:`measure`,
:func:`choose`), judge the exports against torch at registration (:func:`judge`) and read that verdict back
(:func:`read_quality`, :func:`servable`). The backends themselves (torch, ONNX fp32, ONNX int8) are modules of
:mod:`stsreg.product.serving.backends`, each behind its protocol (export / load / describe).

A model folder (:meth:`stsreg.product.model.SiameseRegressor.save`) gains each backend's file (the ONNX ones in the
sentence-transformers layout, ``onnx/`` beside the weights) and ``onnx/backends.json``: per backend its avg7 and drop
against torch, and whether the version may serve it (:func:`judge`), written at registration.

    >>> files = export_all("models/stage2")                  # {"onnx": .../onnx/model.onnx, "onnx-int8": ...}
    >>> m = SiameseRegressor.load("models/stage2"); use_backend(m, "onnx-int8", "models/stage2")
    >>> m.encode(["A man plays a guitar."])                  # (1, 384) float32, computed by ONNX Runtime
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from pathlib import Path

import torch

from stsreg.infra.backend_specs import BACKENDS as SPECS
from stsreg.infra.backend_specs import NAMES as BACKENDS
from stsreg.infra.errors import InputError
from stsreg.product.serving.backends import REGISTRY, file_of
from stsreg.infra.tracking import cpu_name

log = logging.getLogger(__name__)

#: Backend -> its file in a model folder, for the backends that have one (``torch`` runs the safetensors weights).
FILES = {b.name: b.file for b in SPECS if b.file}
QUALITY = "onnx/backends.json"


def export_all(model_dir: str | os.PathLike) -> dict[str, Path]:
    """Write every declared backend's file into ``model_dir``, in the declared order; returns backend -> file."""
    out = {name: Path(model_dir) / file for name, file in FILES.items()}
    for name, path in out.items():
        REGISTRY[name].export(Path(model_dir), path)
    log.info("exported %s", ", ".join(f"{b}: {p} ({p.stat().st_size / 2**20:.1f} MiB)" for b, p in out.items()))
    return out


def available(model_dir: str | os.PathLike) -> list[str]:
    """The backends a model folder holds files for (torch always)."""
    return ["torch", *(b for b, f in FILES.items() if (Path(model_dir) / f).is_file())]


def use_backend(model, backend: str, model_dir: str | os.PathLike, threads: int = 0):
    """Run ``model``'s encoder on ``backend`` (a :data:`~stsreg.product.serving.backends.NAMES` entry) from now on;
    its file is read from ``model_dir`` (the folder ``model`` was loaded from). Returns ``model``, moved where the
    backend runs it (torch: this process's device; the ONNX backends: the CPU, in fp32)."""

    if backend not in REGISTRY:
        raise InputError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    file = file_of(backend, Path(model_dir))
    if file and not file.is_file():
        raise InputError(f"{model_dir} has no {FILES[backend]}: this version was registered without its {backend} "
                         "export (register it again, or serve it with --backend torch)")
    return REGISTRY[backend].load(model, file, threads)


#: Sentences :func:`choose` times each backend on: STS-like lengths, short to long (what serving mostly sees).
PROBE = ["A man is playing a guitar.", "Two dogs run through a field of tall grass near the river.",
         "The committee said on Tuesday that it would review the proposal before the end of the year, officials said.",
         "A woman slices an onion.", "Stocks fell sharply in early trading as investors weighed the latest "
         "inflation figures and the central bank's signals about interest rates.", "Kids play football.",
         "How do I reset my password if I no longer have access to the email address on my account?",
         "The cat sleeps."] * 4
#: How requests arrive at a server: batches of this many sentences under load (the batcher's budget), one at a time
#: when idle.
PROBE_BATCH, PROBE_SINGLE = 256, 16


def measure(model, sentences: list[str] | None = None) -> dict[str, float]:
    """``{"sentences_s", "batch1_p50_ms"}`` of ``model`` on its current backend: the best of three passes over
    :data:`PROBE_BATCH` sentences in one call (throughput under load), and the median of :data:`PROBE_SINGLE`
    one-sentence calls (latency when idle); one warm-up pass of each first."""
    batch = (sentences or PROBE * (PROBE_BATCH // len(PROBE) + 1))[:PROBE_BATCH]
    model.encode(batch, batch_size=64, show_progress=False)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        model.encode(batch, batch_size=64, show_progress=False)
        best = min(best, time.perf_counter() - start)
    single = []
    for s in [PROBE[0]] + PROBE[:PROBE_SINGLE]:
        start = time.perf_counter()
        model.encode([s], batch_size=1, show_progress=False)
        single.append((time.perf_counter() - start) * 1000)
    return {"sentences_s": len(batch) / best, "batch1_p50_ms": statistics.median(single[1:])}


#: What ``auto`` measured at registration (:func:`record_choice`), beside the exports' verdicts.
MEASURED = "onnx/auto_measured.json"


def _where(model, threads: int) -> dict:
    """What a measurement holds only for: this CPU, the intra-op threads and the model's precision setting."""
    return {"cpu": cpu_name(), "threads": threads or torch.get_num_threads(), "precision": model.precision}


def record_choice(model, model_dir: str | os.PathLike, threads: int = 0) -> dict:
    """Registration: :func:`choose` measured here once and stored in ``MEASURED`` (``{cpu, threads, precision,
    backend, rates}``), so that a server started on the same CPU, threads and precision starts and swaps without
    measuring (a server elsewhere measures, as before). Returns the record."""
    backend, rates = choose(model, model_dir, threads, stored=False)
    record = {**_where(model, threads), "backend": backend, "rates": rates}
    (Path(model_dir) / MEASURED).write_text(json.dumps(record, indent=2))
    return record


def _stored_choice(model, model_dir: str | os.PathLike, threads: int) -> tuple[str, dict[str, dict]] | None:
    """(backend, rates) from registration's record when it was made here (:func:`_where`) and holds a rate for
    every backend the folder may serve now (only those kept), else None."""
    path = Path(model_dir) / MEASURED
    record = json.loads(path.read_text()) if path.is_file() else {}
    if not record or any(record.get(k) != v for k, v in _where(model, threads).items()):
        return None
    allowed = servable(model_dir)
    rates = {b: r for b, r in record["rates"].items() if b in allowed}
    return (pick(rates), rates) if set(rates) == set(allowed) else None


def slowdowns(rates: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """Backend -> (its batch-1 p50 / the lowest, the highest sentences/s in batches / its own): how much slower than
    the best backend it is when a request is alone (a quiet server) and when batches are full (a busy one); 1.0 =
    the best at it."""
    alone = min(r["batch1_p50_ms"] for r in rates.values())
    batched = max(r["sentences_s"] for r in rates.values())
    return {b: (r["batch1_p50_ms"] / alone, batched / r["sentences_s"]) for b, r in rates.items()}


def pick(rates: dict[str, dict]) -> str:
    """``auto``'s rule: the backend whose worse slowdown (:func:`slowdowns`), alone or in batches, is the smallest,
    so that neither a quiet server (one request at a time: latency) nor a busy one (full batches: throughput) pays
    much for the other. Judging batches only chose torch on a bf16 CPU at 1.16x int8's throughput and 3.5x its
    latency, which every request at low load paid."""
    worse = {b: max(s) for b, s in slowdowns(rates).items()}
    return min(worse, key=lambda b: (worse[b], b))


def explain(backend: str, rates: dict[str, dict]) -> str:
    """One paragraph for ``GET /metadata`` (``auto.why``): what ``auto`` chose, from which measurements, and why one
    backend serves every request (the start line lists the measurements alone: :func:`describe_rates`)."""
    if not rates:
        return f"{backend}: a GPU is here, and torch is the backend that runs on it"
    parts = "; ".join(f"{b} {r['batch1_p50_ms']:.1f} ms alone ({a:.2f}x the best), {r['sentences_s']:.0f} "
                      f"sentences/s in batches ({f:.2f}x)" for (b, r), (a, f) in
                      zip(rates.items(), slowdowns(rates).values()))
    return (f"{backend}: of the backends this version may serve, the one whose worse slowdown against the best, "
            f"alone (one sentence, p50) or in batches of {PROBE_BATCH} (sentences/s), is the smallest; measured on "
            f"this CPU (at registration, or at start where registration measured elsewhere): {parts}. One "
            "backend answers every request, whatever the load: a text's vector must not depend on how busy the "
            "server is, and the backends' vectors differ (int8 against fp32).")


def choose(model, model_dir: str | os.PathLike, threads: int = 0, stored: bool = True) -> tuple[str, dict[str, dict]]:
    """``serve.backend: auto``: torch where a GPU is (the model moves there); on a CPU each backend the folder may
    serve (:func:`servable`) is measured as requests arrive (:func:`measure`: batched throughput and batch-1 latency)
    and :func:`pick` chooses the one that runs from then on. ``stored``: take registration's measurement instead
    (:func:`record_choice`) when it was made on this CPU with these threads and precision. Returns (backend,
    {backend: measurements})."""
    if torch.cuda.is_available():
        use_backend(model, "torch", model_dir, threads)
        return "torch", {}
    known = _stored_choice(model, model_dir, threads) if stored else None
    if known:
        use_backend(model, known[0], model_dir, threads)
        log.info("backend auto: %s (measured at registration on this CPU: %s)", known[0], describe_rates(known[1]))
        return known
    rates = {}
    for backend in servable(model_dir):
        use_backend(model, backend, model_dir, threads)
        rates[backend] = measure(model)
    chosen = pick(rates)
    use_backend(model, chosen, model_dir, threads)
    log.info("backend auto: %s (measured here: %s)", chosen, describe_rates(rates))
    return chosen, rates


def describe_rates(rates: dict[str, dict]) -> str:
    """``torch 612/s batched, p50 9.1 ms alone; onnx ...``: what :func:`choose` measured, for the start line."""
    return "; ".join(f"{b} {r['sentences_s']:.0f}/s batched, p50 {r['batch1_p50_ms']:.1f} ms alone"
                     for b, r in rates.items())


def judge(avg7: dict[str, float], max_drop: float) -> dict[str, dict]:
    """Backend -> ``{avg7, drop, serving, reason}``: an exported backend serves only if its avg7 is at most
    ``max_drop`` below torch's (``avg7["torch"]``, the evaluated model)."""
    base = avg7["torch"]
    out = {"torch": {"avg7": base, "drop": 0.0, "serving": True, "reason": "the evaluated model"}}
    for backend, score in avg7.items():
        if backend == "torch":
            continue
        drop = base - score
        ok = drop <= max_drop
        out[backend] = {"avg7": score, "drop": drop, "serving": ok,
                        "reason": (f"avg7 drop {drop:.2f} <= bound {max_drop:g}" if ok else
                                   f"kept out of serving: avg7 drop {drop:.2f} > bound {max_drop:g} "
                                   "(serve.max_avg7_drop)")}
    return out


def read_quality(model_dir: str | os.PathLike) -> dict[str, dict]:
    """``onnx/backends.json`` of a registered model folder ({} when the folder has none)."""
    path = Path(model_dir) / QUALITY
    return json.loads(path.read_text()) if path.is_file() else {}


def servable(model_dir: str | os.PathLike, unjudged: bool = False) -> list[str]:
    """The backends the folder may run: torch, and each exported one whose registration judged it within the
    quality bound. ``unjudged``: whether an export never judged may run too (no for serving, which promises the card's
    scores; yes for ``stsreg encode`` on a folder a user exported and asks for by name)."""
    quality = read_quality(model_dir)
    return [b for b in available(model_dir) if b == "torch" or quality.get(b, {}).get("serving", unjudged)]
