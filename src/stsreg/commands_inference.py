"""The inference commands of the CLI: ``stsreg serve`` (a registered model behind MLflow's scoring protocol) and
``stsreg encode`` (a corpus to embeddings). :mod:`stsreg.cli` declares their arguments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from stsreg.infra.config import load_params


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
           "workers": pick(args.workers, "workers", 1), "batch_sentences": pick(args.batch_sentences, "batch_sentences", 256),
           "batch_wait_ms": pick(args.batch_wait_ms, "batch_wait_ms", 2.0), "follow_s": pick(args.follow_s, "follow_s", 0.0),
           "scale": pick(tuple(args.scale) if args.scale else None, "scale", None, version_fact=True),
           "backend": pick(args.backend, "backend", None, version_fact=True)}
    return out


def _start_line(args, source: str, uri: str, info: dict, settings: dict) -> str:
    from stsreg.product.serving.export import describe_rates

    measured = describe_rates(info.get("backends_measured", {}))
    (backend, backend_from), (precision, _), (scale, scale_from) = settings["backend"], settings["precision"], settings["scale"]
    follow = settings["follow_s"][0]
    return (f"serving {args.model_uri} (version {info.get('version', '?')}: {source} in {uri}) on "
            f"http://{args.host}:{args.port}; backend {info.get('backend', '?')} ("
            + (f"setting {backend} from {backend_from}" if backend else "as registered")
            + f"{'; measured ' + measured if measured else ''}), precision {info.get('precision', '?')} "
            f"(setting {precision}) on {info.get('device', '?')}, {info.get('max_length', '?')} tokens per sentence, "
            f"scores on {info.get('score_scale', '?')} ({'from ' + scale_from if scale else 'as registered'}), "
            f"{settings['workers'][0]} worker(s) x "
            f"{settings['threads'][0] or 'default'} thread(s), batches up to {settings['batch_sentences'][0]} sentences "
            f"/ {settings['batch_wait_ms'][0]:g} ms; "
            + (f"following the alias every {follow:g} s; " if follow else "")
            + f"bodies up to {args.max_body_mb} MB; POST /invocations, /v1/embeddings, /similarity; GET /ready, "
            "/metadata, /metrics")


def cmd_serve(args: argparse.Namespace) -> int:
    from stsreg.infra import tracking
    from stsreg.product.serving import serve
    from stsreg.product.serving.model_uri import resolve

    uri = tracking.tracking_uri()
    source = resolve(args.model_uri, uri)  # a missing store, server or alias stops here, in one line
    settings = _serve_settings(args)
    workers = settings["workers"][0]
    app_args = {"artifact_uri": source, "tracking_uri": uri, "max_body_bytes": int(args.max_body_mb * 1024 * 1024),
                "max_depth": args.max_depth, "precision": settings["precision"][0], "scale": settings["scale"][0],
                "backend": settings["backend"][0], "threads": settings["threads"][0],
                "batch_sentences": settings["batch_sentences"][0], "batch_wait_ms": settings["batch_wait_ms"][0],
                "model_uri": args.model_uri, "follow_s": settings["follow_s"][0]}
    announce = lambda app: print(_start_line(args, source, uri, json.loads(app.metadata), settings), flush=True)  # noqa: E731
    if workers == 1:  # loads on a thread: /health answers at once, /ready once the model is in
        serve.serve(serve.build_app(**app_args, lazy=True, on_loaded=announce), args.host, args.port)
        return 0
    probe = serve.build_app(**app_args)  # resolves `auto` once, so every worker runs the same backend
    announce(probe.app)
    info = json.loads(probe.metadata)
    del probe
    serve.serve(None, args.host, args.port, workers, {**app_args, "scale": info.get("score_scale"),
                                                        "backend": info.get("backend", app_args["backend"])})
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    from stsreg.product.serving import batch_encode

    model, backend, model_id = batch_encode.load_model(args.model, args.backend, args.threads)
    job = batch_encode.Job(Path(args.input), Path(args.out), model, model_id, backend, args.column, args.chunk_size,
                           args.batch_size)
    print(f"encoding {len(job.rows)} rows of {args.input} ({len(job.unique)} distinct) with {args.model} on {backend}, "
          f"{model.config.max_length} tokens per sentence, {job.n_chunks} chunk(s) of {args.chunk_size} into "
          f"{job.parts}", flush=True)
    out = batch_encode.encode_corpus(job, fresh=args.fresh)
    resumed = f", {out['resumed_chunks']} chunk(s) found done" if out["resumed_chunks"] else ""
    print(f"wrote {out['out']}: {out['rows']} rows x {out['dim']} ({out['unique']} distinct sentences encoded{resumed})")
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


def cmd_backbone(args: argparse.Namespace) -> int:
    """``stsreg backbone list | install NAME | path NAME`` (:mod:`stsreg.product.backbones`)."""
    from stsreg.infra.errors import InputError
    from stsreg.product import backbones

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
