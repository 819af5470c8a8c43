"""Command-line entry point: one subcommand per DVC stage.

    stsreg fetch   [--params params.yaml] [--mirror DIR] [--no-download]
    stsreg prepare [--params params.yaml]
    stsreg train   --stage 1|2
    stsreg evaluate [--model models/stage2]
    stsreg register
    stsreg promote
    stsreg compare
    stsreg search
    stsreg claims
    stsreg profile
    stsreg serve   [--model-uri models:/sts-regression@champion] [--port 5001]
    stsreg servers start|stop|status
    stsreg deploy [--pool NAME] [--image IMAGE]
    stsreg report
    stsreg preset NAME   (prints `-S key=value` overrides: dvc exp run $(stsreg preset paper))

Exit codes: 0 ok; 2 bad input (:class:`~stsreg.errors.InputError`: invalid params.yaml, missing, empty or
corrupted raw files, too many rejected rows), with one message saying what and where; 1 for anything else
(a bug), with its traceback. Every command that takes ``--params`` validates the whole file first, before
it touches an output.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from stsreg.config import load_params
from stsreg.errors import InputError

log = logging.getLogger("stsreg")

#: Subcommands that are DVC stages: they write pipeline outputs, so they hold the project's pipeline lock.
STAGE_COMMANDS = ("fetch", "prepare", "train", "evaluate", "register", "promote", "compare", "search", "profile", "claims",
                  "nli-table")


def _cmd_fetch(args: argparse.Namespace) -> int:
    from stsreg.data.sources import fetch_stage

    summary = fetch_stage(load_params(args.params), Path(args.params).resolve().parent, args.registry,
                          Path(args.out), args.mirror, args.no_download)
    print(f"fetch: {summary['files']} files ({summary['bytes'] / 1e6:.1f} MB) verified in {args.out} (mirror {summary['mirror']})")
    return 0


def _cmd_prepare(args: argparse.Namespace) -> int:
    from stsreg.data.prepare import prepare

    params = load_params(args.params)
    metrics = prepare(Path(args.raw), Path(args.prepared), Path(args.rejected), Path(args.metrics), params,
                      registry=Path(args.registry))
    kept = sum(d["kept"] for d in metrics["datasets"].values())
    print(f"prepare: {kept} rows kept, {metrics['rejected_total']} rejected (see {args.rejected}), "
          f"metrics in {args.metrics}; `stsreg report` prints the tables")
    return 0


def format_data_report(metrics: dict) -> str:
    """Markdown tables of per-dataset counts and per-task leakage from ``data/prepared/summary.json``."""
    lines = ["| dataset | train | dev | test | other | rejected | duplicate pairs | unscored skipped |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, d in metrics["datasets"].items():
        other = sum(v for k, v in d.items() if k.startswith("rows_") and k not in ("rows_train", "rows_dev", "rows_test"))
        lines.append(f"| {name} | {d.get('rows_train', 0)} | {d.get('rows_dev', 0)} | {d.get('rows_test', 0)} | {other} | "
                     f"{d['rejected']} | {d['duplicate_pairs']} | {d['unscored_skipped']} |")
    lines += ["", f"NLI training rows: {metrics['nli_train_rows']}", "",
              f"Leakage ({metrics['leakage_match']} match) — evaluation test pairs also in a training table:", "",
              f"| task | test pairs | seen (exact) | seen (normalized) | in STS-B train | in SICK train | in NLI train | unseen ({metrics['leakage_match']}) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for task, d in metrics["leakage"].items():
        lines.append(f"| {task} | {d['test_pairs']} | {d['seen_exact']} | {d['seen_normalized']} | {d['seen_in_stsb_train']} | "
                     f"{d['seen_in_sickr_train']} | {d['seen_in_nli_train']} | {d['unseen_' + metrics['leakage_match']]} |")
    if metrics.get("leakage_removed"):
        lines += ["", f"Removed from training for leakage: {metrics['leakage_removed']}"]
    return "\n".join(lines)


def _cmd_train(args: argparse.Namespace) -> int:
    from stsreg import stages

    if stages.world()[0] > 1:
        # under torchrun: every process runs the same loop; no Prefect flow per process
        params = load_params(args.params)
        if args.stage == "1":
            raise SystemExit("stage 1 trains 1,153 parameters on cached features: run it without torchrun")
        summary = stages.run_stage2(params, Path(args.sts), Path(args.stage1_dir), Path(args.stage2_dir), Path(args.checkpoints))
    else:
        from pipelines.train_flow import stage1_flow, stage2_flow

        metrics = (args.metrics or f"metrics/stage{args.stage}.json") if args.metrics != "" else None
        if args.stage == "1":
            summary = stage1_flow(params_path=args.params, nli_path=args.nli, out_dir=args.stage1_dir, cache_dir=args.cache,
                                  metrics_path=metrics)
        else:
            summary = stage2_flow(params_path=args.params, sts_path=args.sts, init_dir=args.stage1_dir,
                                  out_dir=args.stage2_dir, ckpt_dir=args.checkpoints, metrics_path=metrics,
                                  curve_path=args.curve or None)
    if stages.is_main_process():
        shown = {k: v for k, v in summary.items() if not isinstance(v, (list, dict))}
        print(f"stage {args.stage}: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from pipelines.release_flow import evaluate_flow
    from stsreg.evaluate import format_table

    metrics = evaluate_flow(params_path=args.params, model_dir=args.model, sts_path=args.sts, out_dir=args.out,
                            headline_path=args.headline or None)
    print(format_table(metrics))
    return 0


def _cmd_register(args: argparse.Namespace) -> int:
    from pipelines.release_flow import register_flow

    out = register_flow(params_path=args.params, model_dir=args.model, eval_dir=args.eval_dir, out_path=args.out)
    print(f"registered {out['name']} version {out['version']} (alias challenger), avg7 {out['tags']['avg7_spearman']}")
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    from pipelines.release_flow import promote_flow

    out = promote_flow(params_path=args.params, out_path=args.out, headline_path=args.headline or None)
    print(f"promotion: {'PROMOTED' if out['promoted'] else 'kept champion'} — {out['reason']}")
    return 0


def _cmd_nli_table(args: argparse.Namespace) -> int:
    from pipelines.nli_table_flow import nli_table_flow

    nli_table_flow(params_path=args.params)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from pipelines.compare_flow import compare_flow

    compare_flow(params_path=args.params)
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    from pipelines.search_flow import search_flow

    search_flow(params_path=args.params)
    return 0


def _cmd_claims(args: argparse.Namespace) -> int:
    from stsreg import claims

    print(claims.write(Path(args.compare), Path(args.profile_metrics), Path(args.out), nli_dir=Path(args.nli_table)))
    return 0


def _cmd_preset(args: argparse.Namespace) -> int:
    from stsreg.config import PRESETS, with_overrides

    overrides = PRESETS[args.name]
    params = with_overrides(load_params(args.params), overrides)  # the preset must validate against this params.yaml
    if args.write:  # a whole params file, for runs outside DVC (stsreg train/evaluate --params FILE)
        import dataclasses

        import yaml

        from stsreg import atomic

        atomic.write_text(args.write, yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(params))), sort_keys=False))
        print(f"wrote {args.write}: {args.params} with the {args.name} preset applied")
        return 0
    # unquoted YAML scalars (no value holds a space), so `$(stsreg preset NAME)` splits into the right words
    print(" ".join(f"-S {k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in overrides.items()))
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    from pipelines.profile_flow import profile_flow

    profile_flow(params_path=args.params, out_dir=args.out, metrics_path=args.metrics)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from stsreg import serve, tracking

    uri = tracking.tracking_uri()
    print(f"serving {args.model_uri} (tracking {uri}) on http://{args.host}:{args.port}/invocations; "
          f"bodies up to {args.max_body_mb} MB, JSON up to {args.max_depth} levels deep", flush=True)
    serve.serve(args.model_uri, uri, args.host, args.port, int(args.max_body_mb * 1024 * 1024), args.max_depth)
    return 0


def _cmd_servers(args: argparse.Namespace) -> int:
    from stsreg import servers

    project = Path(args.project)
    if args.action == "start":
        try:
            urls = servers.start(project, args.prefect_port, args.mlflow_port, worker=not args.no_worker)
        except RuntimeError as exc:
            print(f"servers failed to start: {exc}", file=sys.stderr)
            return 1
        print(f"Prefect UI   {urls['prefect']}   (API {urls['prefect_api']})\nMLflow UI    {urls['mlflow']}\n"
              f"worker       pool {servers.POOL}: {'running' if not args.no_worker else 'not started'}\n"
              f"stsreg commands now use these servers; logs in {servers.Layout(project.resolve()).state / 'logs'}; "
              f"`stsreg servers stop` stops them")
    elif args.action == "stop":
        stopped = servers.stop(project)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        st = servers.status(project)
        print(json.dumps(st, indent=2))
        return 0 if st.get("running") else 3
    return 0


def _cmd_deploy(args: argparse.Namespace) -> int:
    import os

    from pipelines.deploy import deploy

    if "PREFECT_API_URL" not in os.environ:
        print("no Prefect server: run `stsreg servers start` first (or set PREFECT_API_URL)", file=sys.stderr)
        return 2
    schedule = load_params(args.params).schedule
    for name in deploy(Path(args.project), schedule, args.pool, args.image):
        print(f"deployed {name} on pool {args.pool or schedule.work_pool}")
    print(f"see them at {os.environ['PREFECT_API_URL'].removesuffix('/api')}/deployments; "
          "run one: prefect deployment run stsreg-retrain/weekly")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    metrics_path = Path(args.metrics)
    if not metrics_path.exists():
        print(f"no metrics at {metrics_path}; run `dvc repro` first", file=sys.stderr)
        return 2
    print(format_data_report(json.loads(metrics_path.read_text(encoding="utf-8"))))
    summary_path = Path(args.models) / "stage2" / "training_summary.json"
    if summary_path.exists():
        s = json.loads(summary_path.read_text(encoding="utf-8"))
        curve = s["dev_curve"]
        trained = (f"; best after step 0 {s['trained_best_dev_spearman']:.2f} (step {s['trained_best_step']})"
                   if "trained_best_dev_spearman" in s else "")
        print(f"\nStage 2: STS-B dev Spearman (cosine, x100) {curve[0][1]:.2f} before -> {s['best_dev_spearman']:.2f} "
              f"kept (step {s['best_step']} of {s['total_steps']}; step 0 = nothing beat the start){trained}; curve: "
              + ", ".join(f"{int(step)}:{v:.2f}" for step, v in curve))
    eval_path = Path(args.eval_metrics)
    if eval_path.exists():
        from stsreg.evaluate import format_table

        print("\nEvaluation of models/stage2 (SentEval 'all', Spearman x100 of cosine; unseen = test pairs in no "
              "training table):\n")
        print(format_table(json.loads(eval_path.read_text(encoding="utf-8"))))
    promotion = Path(args.promotion)
    if promotion.exists():
        d = json.loads(promotion.read_text(encoding="utf-8"))
        print(f"\nRegistry: sts-regression v{d['challenger']} {'promoted to champion' if d['promoted'] else 'not promoted'}: {d['reason']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stsreg", description="STS regression pipeline (Translated ReLU / Smooth K2).")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    f = sub.add_parser("fetch", help="copy/download raw files into data/raw and verify sha256",
                       description="Copy every file of the sources registry from a mirror folder (or its upstream URL) "
                                   "into data/raw and verify its sha256.")
    f.add_argument("--params", default="params.yaml")
    f.add_argument("--registry", default="data/sources.json", help="sources registry (dataset, file, sha256, url)")
    f.add_argument("--mirror", default=None, help="mirror folder; overrides STSREG_DATA_MIRROR and fetch.mirror")
    f.add_argument("--out", default="data/raw")
    f.add_argument("--no-download", action="store_true", help="never try upstream URLs")
    f.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("prepare", help="validate raw files into parquet tables, rejects and data metrics",
                       description="Parse every raw format, validate with pandera, write data/prepared/*.parquet, "
                                   "data/rejected/<dataset>.parquet, data/prepared/summary.json and its headline metrics/data.json.")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--raw", default="data/raw")
    p.add_argument("--registry", default="data/sources.json",
                   help="sources registry: every file a dataset needs is checked (present, non-empty, min_rows) first")
    p.add_argument("--prepared", default="data/prepared")
    p.add_argument("--rejected", default="data/rejected")
    p.add_argument("--metrics", default="metrics/data.json")
    p.set_defaults(func=_cmd_prepare)

    t = sub.add_parser("train", help="run training stage 1 (head on NLI) or 2 (fine-tune on STS) as a Prefect flow",
                       description="Stage 1: encoder frozen, head trained on cached NLI embeddings. Stage 2: everything "
                                   "fine-tuned on STS-B + SICK-R train, best STS-B dev checkpoint kept, resumable. "
                                   "Under torchrun (WORLD_SIZE>1) stage 2 runs as DDP without a Prefect flow.")
    t.add_argument("--stage", choices=["1", "2"], required=True)
    t.add_argument("--params", default="params.yaml")
    t.add_argument("--nli", default="data/prepared/nli_train.parquet")
    t.add_argument("--sts", default="data/prepared/sts.parquet")
    t.add_argument("--stage1-dir", default="models/stage1")
    t.add_argument("--stage2-dir", default="models/stage2")
    t.add_argument("--cache", default="cache/embeddings", help="stage-1 embedding cache")
    t.add_argument("--checkpoints", default="checkpoints/stage2", help="stage-2 resumable checkpoints")
    t.add_argument("--metrics", default=None, help="headline metrics file (default metrics/stage<N>.json; '' = none)")
    t.add_argument("--curve", default="reports/stage2/dev_curve.csv", help="stage 2: STS-B dev curve CSV ('' = none)")
    t.set_defaults(func=_cmd_train)

    e = sub.add_parser("evaluate", help="7-task STS evaluation with bootstrap intervals (Prefect flow, MLflow run)",
                       description="SentEval 'all' protocol on STS12-16, STS-B test, SICK-R test (+ subsets, STS-B dev, "
                                   "Pearson, head Spearman, unseen view), 95%% bootstrap intervals. Writes "
                                   "reports/eval/{metrics.json,predictions.parquet,table.md}.")
    e.add_argument("--params", default="params.yaml")
    e.add_argument("--model", default="models/stage2", help="saved model folder, or a backbone name/path (untouched)")
    e.add_argument("--sts", default="data/prepared/sts.parquet")
    e.add_argument("--out", default="reports/eval")
    e.add_argument("--headline", default="metrics/eval.json", help="the headline metrics file ('' = none)")
    e.set_defaults(func=_cmd_evaluate)

    g = sub.add_parser("register", help="log the model as an MLflow pyfunc and register it as `challenger`",
                       description="Log models/stage2 as a pyfunc (sentence1, sentence2 -> cosine, score) in the "
                                   "evaluation's MLflow run; register a version of sts-regression, alias challenger.")
    g.add_argument("--params", default="params.yaml")
    g.add_argument("--model", default="models/stage2")
    g.add_argument("--eval-dir", default="reports/eval")
    g.add_argument("--out", default="reports/registry/challenger.json")
    g.set_defaults(func=_cmd_register)

    pr = sub.add_parser("promote", help="move alias `champion` to the challenger if it wins the gate",
                        description="Promote when avg7 gains >= promote.margin and the paired bootstrap p < "
                                    "promote.alpha; the first version is promoted. The decision is tagged on the version.")
    pr.add_argument("--params", default="params.yaml")
    pr.add_argument("--out", default="reports/registry/promotion.json")
    pr.add_argument("--headline", default="metrics/promote.json", help="the decision's headline numbers ('' = none)")
    pr.set_defaults(func=_cmd_promote)

    cm = sub.add_parser("compare", help="base vs +Contrast vs CoSENT vs cosine MSE vs +Ours vs Translated ReLU vs MSE (resumable)",
                        description="Train and evaluate every compare.methods x compare.seeds on the same data; write "
                                    "reports/compare/{results.md,results.csv,paired.csv,avg7.png} and metrics/compare.json.")
    cm.add_argument("--params", default="params.yaml")
    cm.set_defaults(func=_cmd_compare)

    nt = sub.add_parser("nli-table", help="the NLI-only objective table (the paper's Table 1 analogue; resumable)",
                        description="Train the whole encoder on the NLI table with every nli_table.objectives x "
                                    "nli_table.seeds (softmax CE, MSE, L1, Translated ReLU, Smooth K2, triplet, supervised "
                                    "and unsupervised SimCSE, plus the untouched backbone), score each on the 7 tasks; "
                                    "write reports/nli_table/{results.md,results.csv,paired.csv,avg7.png} and "
                                    "metrics/nli_table.json.")
    nt.add_argument("--params", default="params.yaml")
    nt.set_defaults(func=_cmd_nli_table)

    sr = sub.add_parser("search", help="Optuna search over stage 2 scored on STS-B dev only (resumable)",
                        description="Run (or continue) the study of params.search: each trial fine-tunes models/stage1 "
                                    "with sampled stage-2 settings and is scored by its best STS-B dev Spearman after "
                                    "step 0 (test rows are never read); a median pruner stops weak trials. Writes "
                                    "reports/search/{results.md,trials.csv,best.json,dev_by_trial.png,study.db} and "
                                    "metrics/search.json; one MLflow run per trial under a parent run.")
    sr.add_argument("--params", default="params.yaml")
    sr.set_defaults(func=_cmd_search)

    cl = sub.add_parser("claims", help="the paper's claims with our numbers, intervals and verdicts -> reports/claims.md",
                        description="Read reports/compare/{results,paired}.csv and metrics/profile.json (nothing is "
                                    "trained) and write reports/claims.md: each claim, the paired difference per seed "
                                    "with its 95% CI and p, and a verdict.")
    cl.add_argument("--params", default="params.yaml")
    cl.add_argument("--compare", default="reports/compare")
    cl.add_argument("--profile-metrics", default="metrics/profile.json")
    cl.add_argument("--nli-table", default="reports/nli_table", help="the NLI-only table's outputs (claims 1 and 2)")
    cl.add_argument("--out", default="reports/claims.md")
    cl.set_defaults(func=_cmd_claims)

    ps = sub.add_parser("preset", help="print a named preset as `dvc exp run -S` overrides (e.g. the authors' settings)",
                        description="Print the overrides of a preset; run it as an experiment with "
                                    "`dvc exp run -n paper $(stsreg preset paper) evaluate`, or outside DVC: "
                                    "`stsreg preset paper --write params-paper.yaml`, then `stsreg train --stage 2 "
                                    "--params params-paper.yaml --stage2-dir models/paper --checkpoints "
                                    "checkpoints/paper` and `stsreg evaluate --params params-paper.yaml --model "
                                    "models/paper --out reports/paper`.")
    from stsreg.config import PRESETS

    ps.add_argument("name", choices=sorted(PRESETS))
    ps.add_argument("--params", default="params.yaml")
    ps.add_argument("--write", metavar="FILE", help="write the whole params file with the preset applied instead")
    ps.set_defaults(func=_cmd_preset)

    pf = sub.add_parser("profile", help="peak memory and step time per (method, batch, length); memory_ratio (resumable)",
                        description="Run a few real training steps of regression (frozen encoder / full) and contrastive "
                                    "(hard negatives) per profile.batch_sizes x profile.lengths, each in its own process; "
                                    "configurations predicted over profile.memory_budget_mb or profile.max_step_s are "
                                    "predicted by a cost model instead. Writes reports/profile/{table.md,profile.csv,"
                                    "memory_vs_length.png} and metrics/profile.json (memory_ratio).")
    pf.add_argument("--params", default="params.yaml")
    pf.add_argument("--out", default="reports/profile")
    pf.add_argument("--metrics", default="metrics/profile.json")
    pf.set_defaults(func=_cmd_profile)

    se = sub.add_parser("serve", help="serve a registered model (MLflow scoring protocol) behind a request guard",
                        description="MLflow's scoring app (POST /invocations, GET /ping) for --model-uri, behind a guard "
                                    "that answers oversized bodies with 413 and deeply nested JSON with 400 before "
                                    "MLflow parses them. The registry is MLFLOW_TRACKING_URI or the project's mlflow/.")
    se.add_argument("--model-uri", default="models:/sts-regression@champion")
    se.add_argument("--host", default="127.0.0.1")
    se.add_argument("--port", type=int, default=5001)
    se.add_argument("--max-body-mb", type=float, default=32.0, help="largest request body accepted (MB)")
    se.add_argument("--max-depth", type=int, default=32, help="deepest JSON nesting accepted")
    se.set_defaults(func=_cmd_serve)

    sv = sub.add_parser("servers", help="start/stop/status of the local Prefect + MLflow servers and UIs (and a worker)",
                        description="start: Prefect server + UI, MLflow tracking server + UI (both on 127.0.0.1, state "
                                    "under the project) and a process worker for pool stsreg-process; prints the URLs. "
                                    "While they run, stsreg commands log to them. stop: stops all three.")
    sv.add_argument("action", choices=["start", "stop", "status"])
    sv.add_argument("--project", default=".", help="project folder (state goes to <project>/.stsreg and <project>/mlflow)")
    sv.add_argument("--prefect-port", type=int, default=4200)
    sv.add_argument("--mlflow-port", type=int, default=5000)
    sv.add_argument("--no-worker", action="store_true", help="do not start the process worker")
    sv.set_defaults(func=_cmd_servers)

    dp = sub.add_parser("deploy", help="create the Prefect deployments (weekly retrain, daily champion eval, manual profile)",
                        description="Deploy the flows of pipelines/ops_flow.py from this project folder, with the cron "
                                    "schedules of params.yaml's `schedule` section, to a work pool.")
    dp.add_argument("--params", default="params.yaml")
    dp.add_argument("--project", default=".")
    dp.add_argument("--pool", default=None, help="work pool (default: schedule.work_pool; created if it is a new process pool)")
    dp.add_argument("--image", default=None, help="docker pool: the job image (e.g. stsreg-worker:latest)")
    dp.set_defaults(func=_cmd_deploy)

    r = sub.add_parser("report", help="print the results tables from the metrics files")
    r.add_argument("--metrics", default="data/prepared/summary.json", help="the prepare stage's full data summary")
    r.add_argument("--models", default="models", help="folder with stage1/ and stage2/ outputs")
    r.add_argument("--eval-metrics", default="reports/eval/metrics.json")
    r.add_argument("--promotion", default="reports/registry/promotion.json")
    r.set_defaults(func=_cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("servers",):
        from stsreg.servers import use_running

        use_running(Path("."))  # local servers up -> log to them; down -> embedded defaults
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # Prefect's client logs every HTTP request at INFO
    try:
        if hasattr(args, "params"):
            load_params(args.params)  # the whole file, before any output is touched
        if args.command not in STAGE_COMMANDS:
            return args.func(args)
        from stsreg.locking import pipeline_lock

        with pipeline_lock(Path("."), announce=True):  # a second run started beside this one waits
            return args.func(args)
    except InputError as exc:
        print(f"stsreg {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
