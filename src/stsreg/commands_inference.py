"""The inference commands of the CLI: ``stsreg serve`` (a registered model behind MLflow's scoring protocol) and
``stsreg encode`` (a corpus to embeddings). :mod:`stsreg.cli` declares their arguments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from stsreg.infra.config import load_params


def cmd_serve(args: argparse.Namespace) -> int:
    from stsreg.product import serve
    from stsreg.infra import tracking

    uri = tracking.tracking_uri()
    source = serve.resolve(args.model_uri, uri)  # a missing store, server or alias stops here, in one line
    params = args.params or ("params.yaml" if Path("params.yaml").is_file() else None)
    settings = load_params(params).serve if params else None
    precision = args.precision or (settings.precision if settings else "auto")
    scale = tuple(args.scale) if args.scale else (settings.scale if settings else None)
    backend = args.backend or (settings.backend if settings else None)
    threads = args.threads if args.threads is not None else (settings.threads if settings else 0)
    workers = args.workers or (settings.workers if settings else 1)
    app = serve.build_app(source, uri, int(args.max_body_mb * 1024 * 1024), args.max_depth, precision, scale, backend,
                          threads)
    info = json.loads(app.metadata)
    measured = ", ".join(f"{b} {r:g}/s" for b, r in info.get("backends_measured", {}).items())
    print(f"serving {args.model_uri} ({source} in {uri}) on http://{args.host}:{args.port}/invocations; "
          f"backend {info.get('backend', '?')} (setting {backend or 'as registered'}{': ' + measured if measured else ''}), "
          f"precision {info.get('precision', '?')} (setting {precision}) on {info.get('device', '?')}, "
          f"{info.get('max_length', '?')} tokens per sentence, scores on {info.get('score_scale', '?')}, "
          f"{workers} worker(s) x {threads or 'default'} thread(s); bodies up to {args.max_body_mb} MB, JSON up to "
          f"{args.max_depth} levels deep; GET /metadata says what is served", flush=True)
    app_args = {"artifact_uri": source, "tracking_uri": uri, "max_body_bytes": int(args.max_body_mb * 1024 * 1024),
                "max_depth": args.max_depth, "precision": precision, "scale": info.get("score_scale"),
                "backend": info.get("backend", backend), "threads": threads}
    if workers > 1:
        del app  # each worker builds its own, on the backend resolved here
    serve.serve(app if workers == 1 else None, args.host, args.port, workers, app_args)
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    from stsreg.product import batch_encode

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
        cmd = backbones.install(args.name, dry_run=args.dry_run)
        if args.dry_run:
            print(" ".join(cmd[:cmd.index("<requirements:")]), "with the requirements file:")
            print("\n".join(cmd[cmd.index("<requirements:") + 1:-1]))
            return 0
    print(backbones.resolve_backbone(args.name))
    return 0
