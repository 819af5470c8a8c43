"""The paper's studies: ``stsreg compare``, ``nli-table``, ``baselines``, ``search``, ``claims``, ``profile`` and
``preset``, each verb's parser beside its handler."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from stsreg.commands import add_params
from stsreg.infra.config import PRESETS, load_params, with_overrides
from stsreg.product.backbones import find
from stsreg.experiments import backbone_compare
from stsreg.infra import atomic


def compare(sub, name: str) -> None:
    cm = sub.add_parser(name, help="base vs +Contrast vs CoSENT vs cosine MSE vs +Ours vs Translated ReLU vs MSE "
                                   "(resumable)",
                        description="Train and evaluate every compare.methods x compare.seeds on the same data; write "
                                    "reports/compare/{results.md,results.csv,paired.csv,avg7.png} and "
                                    "metrics/compare.json.")
    add_params(cm)
    cm.add_argument("--backbone", default=None,
                    help="the same rows on another backbone (a packaged name, e.g. all-mpnet-base-v2, a Hugging Face "
                         "name or a local path) -> reports/compare_backbones/<name>/, with its declared settings "
                         "(stsreg.experiments.backbone_compare.SETTINGS)")
    cm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param for this comparison (repeatable), e.g. --set compare.seeds=[42,43]")
    cm.add_argument("--out", default=None, help="with --backbone / --set: the comparison's folder")
    cm.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from pipelines.experiments.compare_flow import compare_flow
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


def nli_table(sub, name: str) -> None:
    nt = sub.add_parser(name, help="the NLI-only objective table (the paper's Table 1 analogue; resumable)",
                        description="Train the whole encoder on the NLI table with every nli_table.objectives x "
                                    "nli_table.seeds (softmax CE, MSE, L1, Translated ReLU, Smooth K2, triplet, "
                                    "supervised and unsupervised SimCSE, plus the untouched backbone), score each on "
                                    "the 7 tasks; write "
                                    "reports/nli_table/{results.md,results.csv,paired.csv,avg7.png} and "
                                    "metrics/nli_table.json.")
    add_params(nt)
    nt.set_defaults(func=cmd_nli_table)


def cmd_nli_table(args: argparse.Namespace) -> int:
    from pipelines.experiments.nli_table_flow import nli_table_flow

    nli_table_flow(params_path=args.params)
    return 0


def baselines(sub, name: str) -> None:
    bl = sub.add_parser(name, help="the comparative study's systems on STS-B (word vectors to cross-encoders; "
                                          "resumable)",
                        description="Train every baselines.systems on STS-B train (selected on STS-B dev): averaged "
                                    "pretrained / self-trained word vectors, RNN / LSTM / GRU, InferSent, "
                                    "CLS-projection and mean-pooling bi-encoders, cross-encoders, S-LLM full and LoRA; "
                                    "score each on STS-B test (Pearson, Spearman, MSE on label / 5) and the 7 tasks; "
                                    "measure a cross-encoder's retrieval cost; write "
                                    "reports/baselines/{results.md,results.csv,stsb.png} and metrics/baselines.json.")
    add_params(bl)
    bl.set_defaults(func=cmd_baselines)


def cmd_baselines(args: argparse.Namespace) -> int:
    from pipelines.experiments.baselines_flow import baselines_flow

    baselines_flow(params_path=args.params)
    return 0


def search(sub, name: str) -> None:
    sr = sub.add_parser(name, help="Optuna search over stage 2 scored on STS-B dev only (resumable)",
                        description="Run (or continue) the study of params.search: each trial fine-tunes models/stage1 "
                                    "with sampled stage-2 settings and is scored by its best STS-B dev Spearman after "
                                    "step 0 (test rows are never read); a median pruner stops weak trials. Writes "
                                    "reports/search/{results.md,trials.csv,best.json,dev_by_trial.png,study.db} and "
                                    "metrics/search.json; one MLflow run per trial under a parent run.")
    add_params(sr)
    sr.add_argument("--backbone", default=None,
                    help="search on another backbone (a packaged name, e.g. all-mpnet-base-v2, a Hugging Face name or "
                         "a local path), from its comparison's stage-1 model, scored on its STS-B dev -> "
                         "reports/search_backbones/<name>/, with its declared points "
                         "(stsreg.experiments.backbone_search.SETTINGS)")
    sr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param for this search (repeatable), e.g. --set search.trials=3")
    sr.add_argument("--out", default=None, help="with --backbone / --set: the search's folder")
    sr.set_defaults(func=cmd_search)


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


def claims(sub, name: str) -> None:
    cl = sub.add_parser(name, help="the paper's claims with our numbers, intervals and verdicts -> reports/claims.md",
                        description="Read each backbone's comparison ({results,paired}.csv of reports/compare and "
                                    "reports/compare_backbones/<name>) and metrics/profile.json (nothing is trained) "
                                    "and write reports/claims.md: each claim, one column per backbone with the paired "
                                    "difference, its 95% CI and p per seed, and a verdict.")
    add_params(cl)
    cl.add_argument("--compare", default="reports/compare", help="the comparison's outputs on model.backbone")
    cl.add_argument("--backbone-compare", action="append", metavar="DIR",
                    help="a comparison on another backbone (stsreg compare --backbone), one column each; repeatable "
                         "(default: reports/compare_backbones/<name> of every backbone with declared settings)")
    cl.add_argument("--profile-metrics", default="metrics/profile.json", help="the profile's memory ratio")
    cl.add_argument("--nli-table", default="reports/nli_table", help="the NLI-only table's outputs (claims 1 and 2)")
    cl.add_argument("--out", default="reports/claims.md", help="the claims table")
    cl.set_defaults(func=cmd_claims)


def cmd_claims(args: argparse.Namespace) -> int:
    from stsreg.experiments import backbone_compare, claims

    backbone = load_params(args.params).model.backbone
    packaged = find(backbone)  # `default` is named as packaged (all-MiniLM-L6-v2) in the column's header
    main = claims.load(Path(args.compare), backbone=packaged.name if packaged else backbone)
    others = args.backbone_compare if args.backbone_compare is not None else [
        str(backbone_compare.folder(name)) for name in backbone_compare.SETTINGS]
    comparisons = [main] + [claims.load(Path(folder)) for folder in others]
    print(claims.write(comparisons, Path(args.profile_metrics), Path(args.out), nli_dir=Path(args.nli_table)))
    return 0


def profile(sub, name: str) -> None:
    pf = sub.add_parser(name, help="peak memory and step time per (method, batch, length); memory_ratio (resumable)",
                        description="Run a few real training steps of regression (frozen encoder / full) and "
                                    "contrastive (hard negatives) per profile.batch_sizes x profile.lengths, each in "
                                    "its own process; configurations predicted over profile.memory_budget_mb or "
                                    "profile.max_step_s are predicted by a cost model instead. Writes "
                                    "reports/profile/{table.md,profile.csv,memory_vs_length.png} and "
                                    "metrics/profile.json (memory_ratio).")
    add_params(pf)
    pf.add_argument("--out", default="reports/profile", help="tables and plot")
    pf.add_argument("--metrics", default="metrics/profile.json", help="memory_ratio")
    pf.set_defaults(func=cmd_profile)


def cmd_profile(args: argparse.Namespace) -> int:
    from pipelines.experiments.profile_flow import profile_flow

    profile_flow(params_path=args.params, out_dir=args.out, metrics_path=args.metrics)
    return 0


def preset(sub, name: str) -> None:
    ps = sub.add_parser(name, help="print a named preset as `dvc exp run -S` overrides (e.g. the authors' settings)",
                        description="Print the overrides of a preset; run it as an experiment with `dvc exp run -n "
                                    "paper $(stsreg preset paper) evaluate`, or outside DVC: `stsreg preset paper "
                                    "--write params-paper.yaml`, then `stsreg train --stage 2 --params "
                                    "params-paper.yaml --stage2-dir models/paper --checkpoints checkpoints/paper` and "
                                    "`stsreg evaluate --params params-paper.yaml --model models/paper --out "
                                    "reports/paper`.")
    ps.add_argument("name", choices=sorted(PRESETS), help="the preset")
    add_params(ps)
    ps.add_argument("--write", metavar="FILE", help="write the whole params file with the preset applied instead")
    ps.set_defaults(func=cmd_preset)


def cmd_preset(args: argparse.Namespace) -> int:
    overrides = PRESETS[args.name]
    params = with_overrides(load_params(args.params), overrides)  # the preset must validate against this params.yaml
    if args.write:  # a whole params file, for runs outside DVC (stsreg train/evaluate --params FILE)
        import yaml


        atomic.write_text(args.write, yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(params))),
                                                     sort_keys=False))
        print(f"wrote {args.write}: {args.params} with the {args.name} preset applied")
        return 0
    # unquoted YAML scalars (no value holds a space), so `$(stsreg preset NAME)` splits into the right words
    print(" ".join(f"-S {k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in overrides.items()))
    return 0
