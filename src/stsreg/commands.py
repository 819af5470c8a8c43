"""What each ``stsreg`` subcommand does (the parser and the entry point are in :mod:`stsreg.cli`).

Stage commands call their Prefect flow (``pipelines/``); the rest start servers, deployments or print reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stsreg.infra.config import load_params
from stsreg.infra.public_tables import DEV_TABLE


def cmd_fetch(args: argparse.Namespace) -> int:
    from stsreg.product.data.sources import fetch_stage

    summary = fetch_stage(load_params(args.params), Path(args.params).resolve().parent, args.registry,
                          Path(args.out), args.mirror, args.no_download)
    print(f"fetch: {summary['files']} files ({summary['bytes'] / 1e6:.1f} MB) verified in {args.out} (mirror {summary['mirror']})")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from stsreg.product.data.prepare import prepare
    from stsreg.product.timings import timed

    with timed("prepare"):  # beside the outputs: a DVC output holds no clock
        metrics = prepare(Path(args.raw), Path(args.prepared), Path(args.rejected), Path(args.metrics),
                          load_params(args.params), registry=Path(args.registry))
    kept = sum(d["kept"] for d in metrics["datasets"].values())
    print(f"prepare: {kept} rows kept, {metrics['rejected_total']} rejected (see {args.rejected}), "
          f"metrics in {args.metrics}; `stsreg report` prints the tables")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from pipelines.product.release_flow import evaluate_flow
    from stsreg.product.sts_eval import format_table

    metrics = evaluate_flow(params_path=args.params, model_dir=args.model, sts_path=args.sts, out_dir=args.out,
                            headline_path=args.headline or None)
    print(format_table(metrics))
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    from pipelines.product.release_flow import register_flow

    out = register_flow(params_path=args.params, model_dir=args.model, eval_dir=args.eval_dir, out_path=args.out)
    backends = "; ".join(f"{k.split('.')[1]} avg7 {out['tags'][k]} ({out['tags'][k.replace('.avg7', '.reason')]})"
                         for k in out["tags"] if k.startswith("backend.") and k.endswith(".avg7"))
    print(f"registered {out['name']} version {out['version']} (alias challenger), avg7 {out['tags']['avg7_spearman']}"
          + (f"; exports: {backends}" if backends else ""))
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from pipelines.product.release_flow import promote_flow

    out = promote_flow(params_path=args.params, out_path=args.out, headline_path=args.headline or None)
    print(f"promotion: {'PROMOTED' if out['promoted'] else 'kept champion'} — {out['reason']}")
    return 0


def cmd_nli_table(args: argparse.Namespace) -> int:
    from pipelines.experiments.nli_table_flow import nli_table_flow

    nli_table_flow(params_path=args.params)
    return 0


def cmd_baselines(args: argparse.Namespace) -> int:
    from pipelines.experiments.baselines_flow import baselines_flow

    baselines_flow(params_path=args.params)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pipelines.experiments.compare_flow import compare_flow
    from stsreg.experiments import backbone_compare

    if not (args.backbone or args.set):
        compare_flow(params_path=args.params)
        return 0
    params = backbone_compare.from_cli(load_params(args.params), args.backbone, args.set)
    out = Path(args.out) if args.out else backbone_compare.folder(params.model.backbone)
    backbone_compare.write_params(params, out / "params.yaml")
    print(f"comparison on {params.model.backbone}: rows {', '.join(params.compare.methods)} x seeds "
          f"{', '.join(map(str, params.compare.seeds))} -> {out}", flush=True)
    compare_flow(params_path=str(out / "params.yaml"), runs_dir=str(out / "runs"), out_dir=str(out),
                 metrics_path=str(out / "metrics.json"))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from pipelines.experiments.search_flow import search_flow
    from stsreg.experiments import backbone_compare, backbone_search

    if not (args.backbone or args.set):
        search_flow(params_path=args.params)
        return 0
    params = backbone_compare.from_cli(load_params(args.params), args.backbone, args.set, backbone_search.resolved)
    out = Path(args.out) if args.out else backbone_search.folder(params.model.backbone)
    init = backbone_search.prepare(params, out)
    search_flow(**backbone_search.flow_args(out, init))
    backbone_search.finish(params, out, init)
    return 0


def cmd_claims(args: argparse.Namespace) -> int:
    from stsreg.experiments import backbone_compare, claims
    from stsreg.product.backbones import find

    backbone = load_params(args.params).model.backbone
    packaged = find(backbone)  # `default` is named as packaged (all-MiniLM-L6-v2) in the column's header
    main = claims.load(Path(args.compare), backbone=packaged.name if packaged else backbone)
    others = args.backbone_compare if args.backbone_compare is not None else [
        str(backbone_compare.folder(name)) for name in backbone_compare.SETTINGS]
    comparisons = [main] + [claims.load(Path(folder)) for folder in others]
    print(claims.write(comparisons, Path(args.profile_metrics), Path(args.out), nli_dir=Path(args.nli_table)))
    return 0


def cmd_preset(args: argparse.Namespace) -> int:
    from stsreg.infra.config import PRESETS, with_overrides

    overrides = PRESETS[args.name]
    params = with_overrides(load_params(args.params), overrides)  # the preset must validate against this params.yaml
    if args.write:  # a whole params file, for runs outside DVC (stsreg train/evaluate --params FILE)
        import dataclasses

        import yaml

        from stsreg.infra import atomic

        atomic.write_text(args.write, yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(params))), sort_keys=False))
        print(f"wrote {args.write}: {args.params} with the {args.name} preset applied")
        return 0
    # unquoted YAML scalars (no value holds a space), so `$(stsreg preset NAME)` splits into the right words
    print(" ".join(f"-S {k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in overrides.items()))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from pipelines.experiments.profile_flow import profile_flow

    profile_flow(params_path=args.params, out_dir=args.out, metrics_path=args.metrics)
    return 0


def cmd_servers(args: argparse.Namespace) -> int:
    from stsreg.infra import local_servers
    from stsreg.infra.mlflow_ui import runs_page

    project = Path(args.project)
    if args.action == "start":
        try:
            urls = local_servers.start(project, args.prefect_port, args.mlflow_port, worker=not args.no_worker,
                                       timeout=args.timeout, host=args.host, profile=not args.no_profile)
        except RuntimeError as exc:
            print(f"servers failed to start: {exc}", file=sys.stderr)
            return 1
        logs = local_servers.Layout(project.resolve()).state / "logs"
        profile = (f"Prefect profile `{local_servers.PROFILE}` is active: `prefect ...` commands use this server "
                   "(`stsreg servers stop` switches back)" if not args.no_profile else
                   f"no Prefect profile written: export PREFECT_API_URL={urls['prefect_api']} for `prefect ...`")
        print(f"Prefect UI   {urls['prefect']}   (API {urls['prefect_api']})\n"
              f"MLflow UI    {runs_page(urls['mlflow'])}\n"
              f"worker       pool {local_servers.POOL}: {'running' if not args.no_worker else 'not started'}\n"
              f"{profile}\n"
              f"for `mlflow ...` commands: export MLFLOW_TRACKING_URI={urls['mlflow']}\n"
              f"stsreg commands now use these servers; logs in {logs}; `stsreg servers stop` stops them")
    elif args.action == "stop":
        stopped = local_servers.stop(project)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        st = local_servers.status(project)
        print(json.dumps(st, indent=2))
        return 0 if st.get("running") else 3
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from prefect.settings import PREFECT_API_URL

    from pipelines.product.deploy import deploy

    api = PREFECT_API_URL.value()  # the environment, else the active Prefect profile (`make servers` writes one)
    if not api:
        print("no Prefect server: run `make servers` first (or set PREFECT_API_URL)", file=sys.stderr)
        return 2
    schedule = load_params(args.params).schedule
    for name in deploy(Path(args.project), schedule, args.pool, args.image):
        print(f"deployed {name} on pool {args.pool or schedule.work_pool}")
    print(f"see them at {api.removesuffix('/api')}/deployments; "
          "run one: prefect deployment run stsreg-retrain/weekly")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from stsreg.product.run_report import run_report

    if args.readme:
        return _sync_readme(Path(args.readme), args.check)
    if not Path(args.metrics).exists():
        print(f"no data summary at {args.metrics}; run `dvc repro` first", file=sys.stderr)
        return 2
    dev_table = load_params(args.params).stage2.dev_table if Path(args.params).is_file() else DEV_TABLE
    print(run_report(Path(args.metrics), Path(args.models), Path(args.eval_metrics), Path(args.promotion), dev_table))
    from stsreg.infra import tracking
    from stsreg.product.timings import format_timings

    timings = format_timings(tracking.tracking_uri())
    if timings:
        print("\nTime to a champion (the last run of each step; MLflow run durations):\n" + timings)
    return 0


def _sync_readme(markdown: Path, check: bool) -> int:
    """``stsreg report --readme FILE [--check]``: the generated blocks of FILE against their report files."""
    from stsreg.infra.doc_blocks import sync

    stale = sync(markdown, check=check)
    verb = "out of date" if check else "rewritten"
    print("\n".join(f"{markdown}: block {path} {verb}" for path in stale) or f"{markdown}: every generated block is up to date")
    return 3 if stale and check else 0  # 3: out of date (1 is kept for bugs, 2 for bad input)
