"""The pipeline's own stages and their report: ``stsreg fetch``, ``prepare``, ``evaluate``, ``register``, ``promote``
and ``report``, each verb's parser beside its handler."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from stsreg.commands import add_params
from stsreg.infra.config import load_params
from stsreg.infra.doc_blocks import sync
from stsreg.infra.errors import InputError
from stsreg.infra.public_tables import DEV_TABLE
from stsreg.product.champion_pin import PIN_FILE, pin_champion, read_pin
from stsreg.product.timings import format_timings, timed
from stsreg.infra import tracking
from stsreg.product.loop_clock import format_clock


def fetch(sub, name: str) -> None:
    f = sub.add_parser(name, help="copy/download raw files into data/raw and verify sha256",
                       description="Copy every file of the sources registry from a mirror folder (or its upstream URL) "
                                   "into data/raw and verify its sha256.")
    add_params(f)
    f.add_argument("--registry", default="data/sources.json", help="sources registry (dataset, file, sha256, url)")
    f.add_argument("--mirror", default=None, help="mirror folder; overrides STSREG_DATA_MIRROR and fetch.mirror")
    f.add_argument("--out", default="data/raw", help="where the raw files go")
    f.add_argument("--no-download", action="store_true", help="never try upstream URLs")
    f.set_defaults(func=cmd_fetch)


def cmd_fetch(args: argparse.Namespace) -> int:
    from stsreg.product.data.sources import fetch_stage

    summary = fetch_stage(load_params(args.params), Path(args.params).resolve().parent, args.registry,
                          Path(args.out), args.mirror, args.no_download)
    print(f"fetch: {summary['files']} files ({summary['bytes'] / 1e6:.1f} MB) verified in {args.out} (mirror "
          f"{summary['mirror']})")
    return 0


def prepare(sub, name: str) -> None:
    p = sub.add_parser(name, help="validate raw files into parquet tables, rejects and data metrics",
                       description="Parse every raw format, validate with pandera, write data/prepared/*.parquet, "
                                   "data/rejected/<dataset>.parquet, data/prepared/summary.json and its headline "
                                   "metrics/data.json.")
    add_params(p)
    p.add_argument("--raw", default="data/raw", help="the raw files (fetch's output)")
    p.add_argument("--registry", default="data/sources.json",
                   help="sources registry: every file a dataset needs is checked (present, non-empty, min_rows) first")
    p.add_argument("--prepared", default="data/prepared", help="the prepared tables and summary.json")
    p.add_argument("--rejected", default="data/rejected", help="rejected rows and duplicates")
    p.add_argument("--metrics", default="metrics/data.json", help="the headline data metrics")
    p.set_defaults(func=cmd_prepare)


def cmd_prepare(args: argparse.Namespace) -> int:
    from stsreg.product.data.prepare import prepare

    with timed("prepare"):  # beside the outputs: a DVC output holds no clock
        metrics = prepare(Path(args.raw), Path(args.prepared), Path(args.rejected), Path(args.metrics),
                          load_params(args.params), registry=Path(args.registry))
    kept = sum(d["kept"] for d in metrics["datasets"].values())
    print(f"prepare: {kept} rows kept, {metrics['rejected_total']} rejected (see {args.rejected}), "
          f"metrics in {args.metrics}; `stsreg report` prints the tables")
    return 0


def evaluate(sub, name: str) -> None:
    e = sub.add_parser(name, help="the STS evaluation: 7 public tasks (avg7) and the test split of each table "
                                        "you declared, with bootstrap intervals (Prefect flow, MLflow run)",
                       description="SentEval 'all' protocol on STS12-16, STS-B test, SICK-R test (+ subsets, STS-B "
                                   "dev, Pearson, head Spearman, unseen view) and on the test split of every table "
                                   "declared in prepare.sts_tables (its own row, not in avg7), 95% bootstrap "
                                   "intervals. Writes reports/eval/{metrics.json,predictions.parquet,table.md}.")
    add_params(e)
    e.add_argument("--model", default="models/stage2", help="saved model folder, or a backbone name/path (untouched)")
    e.add_argument("--sts", default="data/prepared/sts.parquet", help="the STS table (test rows scored)")
    e.add_argument("--out", default="reports/eval", help="metrics.json, predictions.parquet, table.md")
    e.add_argument("--headline", default="metrics/eval.json", help="the headline metrics file ('' = none)")
    e.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from pipelines.product.release_flow import evaluate_flow
    from stsreg.product.sts_eval import format_table

    metrics = evaluate_flow(params_path=args.params, model_dir=args.model, sts_path=args.sts, out_dir=args.out,
                            headline_path=args.headline or None)
    print(format_table(metrics))
    return 0


def register(sub, name: str) -> None:
    g = sub.add_parser(name, help="log the model as an MLflow pyfunc and register it as `challenger`",
                       description="Log models/stage2 as a pyfunc (sentence1, sentence2 -> cosine, score) in the "
                                   "evaluation's MLflow run with its model card; register a version of sts-regression, "
                                   "alias challenger.")
    add_params(g)
    g.add_argument("--model", default="models/stage2", help="the model folder to register")
    g.add_argument("--eval-dir", default="reports/eval", help="its evaluation (metrics and MLflow run)")
    g.add_argument("--out", default="reports/registry/challenger.json", help="the registered version (model_card.md "
                                                                             "beside it)")
    g.set_defaults(func=cmd_register)


def cmd_register(args: argparse.Namespace) -> int:
    from pipelines.product.release_flow import register_flow

    out = register_flow(params_path=args.params, model_dir=args.model, eval_dir=args.eval_dir, out_path=args.out)
    if out.get("registered") is False:
        print(f"not registered: {out['reason']}")
        return 0
    backends = "; ".join(f"{k.split('.')[1]} avg7 {out['tags'][k]} ({out['tags'][k.replace('.avg7', '.reason')]})"
                         for k in out["tags"] if k.startswith("backend.") and k.endswith(".avg7"))
    print(f"registered {out['name']} version {out['version']} (alias challenger), avg7 {out['tags']['avg7_spearman']}"
          + (f"; exports: {backends}" if backends else ""))
    return 0


def promote(sub, name: str) -> None:
    pr = sub.add_parser(name, help="move alias `champion` to the challenger if it wins the gate",
                        description="Promote when every metric of promote.metrics (avg7, the mean of the 7 public "
                                    "tasks, and/or a declared table's test split, e.g. [avg7, support]) gains >= "
                                    "promote.margin with a paired bootstrap p < promote.alpha, pairs matched by "
                                    "content; with no champion yet, against the untouched backbone. Where the "
                                    "champion's stored predictions miss today's test pairs it is re-scored first. The "
                                    "decision (per metric: pairs compared, gain, interval, p) goes to --out and is "
                                    "tagged on the version.")
    add_params(pr)
    pr.add_argument("--out", default="reports/registry/promotion.json", help="the decision and its reason")
    pr.add_argument("--headline", default="metrics/promote.json", help="the decision's headline numbers ('' = none)")
    pr.set_defaults(func=cmd_promote)


def cmd_promote(args: argparse.Namespace) -> int:
    from pipelines.product.release_flow import promote_flow

    out = promote_flow(params_path=args.params, out_path=args.out, headline_path=args.headline or None)
    print(f"promotion: {'PROMOTED' if out['promoted'] else 'kept champion'} — {out['reason']}")
    return 0


def report(sub, name: str) -> None:
    r = sub.add_parser(name, help="print the results tables from the metrics files")
    r.add_argument("--metrics", default="data/prepared/summary.json", help="the prepare stage's full data summary")
    r.add_argument("--models", default="models", help="folder with stage1/ and stage2/ outputs")
    r.add_argument("--eval-metrics", default="reports/eval/metrics.json", help="the evaluation's metrics")
    r.add_argument("--promotion", default="reports/registry/promotion.json", help="the last gate decision")
    r.add_argument("--params", default="params.yaml", help="the params file (stage2.dev_table names the dev split)")
    r.add_argument("--readme", metavar="FILE", help="instead: rewrite FILE's generated blocks from their report files")
    r.add_argument("--check", action="store_true",
                   help="with --readme: write nothing; exit 3 if a block is out of date")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from stsreg.product.run_report import run_report

    if args.readme:
        return _sync_readme(Path(args.readme), args.check)
    if not Path(args.metrics).exists():
        print(f"no data summary at {args.metrics}; run `dvc repro` first", file=sys.stderr)
        return 2
    dev_table = load_params(args.params).stage2.dev_table if Path(args.params).is_file() else DEV_TABLE
    print(run_report(Path(args.metrics), Path(args.models), Path(args.eval_metrics), Path(args.promotion), dev_table))
    timings = format_timings(tracking.tracking_uri())
    if timings:
        print("\nTime to a champion (the last run of each step; MLflow run durations):\n" + timings)
    loop = Path("reports/retrain/last_run.json")
    if loop.exists():
        clock = format_clock(json.loads(loop.read_text(encoding="utf-8")))
        if clock:
            print(f"\nThe last retrain's clock ({loop}):\n\n{clock}")
    return 0


def _sync_readme(markdown: Path, check: bool) -> int:
    """``stsreg report --readme FILE [--check]``: the generated blocks of FILE against their report files."""
    stale = sync(markdown, check=check)
    verb = "out of date" if check else "rewritten"
    print("\n".join(f"{markdown}: block {path} {verb}" for path in stale) or f"{markdown}: every generated block is up "
                                                                             f"to date")
    return 3 if stale and check else 0  # 3: out of date (1 is kept for bugs, 2 for bad input)


def champion(sub, name: str) -> None:
    ch = sub.add_parser(name, help="show the registered versions and the champion, pin it for the next retrain, or set "
                                   "it by hand",
                        description="`stsreg champion show`: the champion, the challenger, the pinned champion and the "
                                    "latest versions with their avg7 and the gate's decision. `stsreg champion pin`: "
                                    "write the registry's champion into champion.json, the file stage 2 depends on "
                                    "(a warm retrain continues the version pinned there; `stsreg data add` and "
                                    "the retrain flow pin it for you: run it before a `dvc repro` by hand when "
                                    "the champion moved elsewhere). `stsreg champion set VERSION --reason TEXT`: "
                                    "move alias `champion` to VERSION without the gate (a rollback after a bad "
                                    "promotion), recorded as a tag on the version, and pin it; a `stsreg serve` "
                                    "following the alias swaps to it at its next poll.")
    ch.add_argument("action", choices=["show", "pin", "set", "rollback"],
                    help="show: the versions and aliases; pin: the champion into champion.json; set: move the champion "
                         "to VERSION; rollback: back to the champion before the current one")
    ch.add_argument("version", nargs="?", type=int, help="set: the version to make the champion")
    ch.add_argument("--reason", default="", help="set: why (kept on the version's tag)")
    ch.add_argument("--last", type=int, default=10, help="show: how many of the latest versions")
    ch.set_defaults(func=cmd_champion)


def cmd_champion(args: argparse.Namespace) -> int:
    from stsreg.product.champion_by_hand import previous_champion, set_champion
    from stsreg.product.registry import MODEL_NAME, version_by_alias

    if args.action in ("set", "rollback"):
        if (args.action == "set" and args.version is None) or not args.reason.strip():
            raise InputError(f"champion {args.action} needs {'the VERSION and ' if args.action == 'set' else ''}a "
                             "--reason (kept with the move)")
        version = args.version if args.action == "set" else previous_champion()
        out = set_champion(version, args.reason.strip())
        print(f"champion: version {out['champion']} (was {out['previous'] or 'none'}), set by hand: {args.reason}")
    if args.action in ("pin", "set", "rollback"):
        pin, changed = pin_champion()
        print(f"{PIN_FILE}: {pin.words()} ({'pinned' if changed else 'unchanged'}): the next stage 2 "
              f"{'continues it' if pin.version is not None else 'starts from stage 1'}")
        return 0
    print(f"pinned in {PIN_FILE}: {read_pin().words()}")
    c = tracking.client()
    aliases = {a: version_by_alias(c, MODEL_NAME, a) for a in ("champion", "challenger")}
    print(", ".join(f"{a}: v{v.version}" if v else f"{a}: none" for a, v in aliases.items()))
    versions = sorted(c.search_model_versions(f"name='{MODEL_NAME}'"), key=lambda v: -int(v.version))[:args.last]
    for v in versions:
        t = v.tags
        hand = f"; set by hand {t['champion.set_by_hand']}" if "champion.set_by_hand" in t else ""
        print(f"  v{v.version}: avg7 {t.get('avg7_spearman', '?')}, gate: {t.get('promotion.decision', 'not judged')}"
              f"{hand}")
    return 0
