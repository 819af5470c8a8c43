"""Command-line entry point: one subcommand per verb (each verb's parser and handler: :mod:`stsreg.commands`).

    stsreg --help            # every subcommand; `stsreg <command> --help`: its flags with their defaults
    stsreg preset NAME       # prints `-S key=value` overrides: dvc exp run $(stsreg preset paper)

Exit codes: 0 ok; 2 bad input (:class:`~stsreg.infra.errors.InputError`: invalid params.yaml, missing, empty or
corrupted raw files, too many rejected rows, a stage's input missing, no champion to serve), with one message saying
what and where; 3 ``report --check``: out of date; 1 for anything else (a bug), with its traceback. Every command that
takes ``--params`` validates the whole file and checks its inputs (:mod:`stsreg.infra.preflight`) before it touches an
output.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# The embedded Prefect server a stage starts waits 20 s for itself by default: on a 2-core machine busy with a training
# run beside it, it can take longer and the stage failed with "Timed out while attempting to connect to ephemeral
# Prefect
# API server". Set before Prefect is imported (its settings are read then); a value of the user's wins.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Third-party progress bars a person does not wait on (MLflow's per-file artifact bars, Hugging Face's weight loading
# and shard writing): off, before those libraries read their settings at import. The project's own bars
# (stsreg.infra.progress) show where people wait. A value of the user's wins.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # `datasets`' map bars: seconds-long tokenization
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # its INFO lines: store migrations, "Creating initial tables"
# A tracking server that went away (killed, restarted) is retried for about a minute (2+4+8+16+32 s), which rides out
# a restart; MLflow's default (7 retries, ~4 min of back-off) held a stage for minutes before it said so. A value of
# the user's wins.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
# the embedded Prefect server's usage telemetry (as `make` sets it): offline it fails with an ERROR line on every stage
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from stsreg import __version__
from stsreg.commands import data, operations, pipeline, serving, studies, train
from stsreg.infra.config import load_params
from stsreg.infra.errors import InputError
from stsreg.infra.preflight import PREPARED, check_inputs
from stsreg.infra.local_servers import use_running
from stsreg.infra.locking import pipeline_lock
from stsreg.product import backbones

log = logging.getLogger("stsreg")

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
def _stage_inputs(a: argparse.Namespace) -> list[tuple[str, str]]:
    """``stsreg train``: stage 1 reads the NLI table; stage 2 the STS table and stage 1's model."""
    return [(a.nli, "prepare")] if a.stage == "1" else [(a.sts, "prepare"), (a.stage1_dir, "stage1")]


def _search_inputs(a: argparse.Namespace) -> list[tuple[str, str]]:
    """On another backbone, its comparison's stage 1 (trained there if missing) reads the NLI table."""
    return [(STS, "prepare")] + ([(NLI, "prepare")] if a.backbone or a.set else [("models/stage1", "stage1")])


_TABLES = [(STS, "prepare"), (NLI, "prepare")]  # what the studies read: the prepared STS and NLI tables

COMMANDS: dict[str, Command] = {
    "fetch": Command(pipeline.fetch, stage=True),
    "prepare": Command(pipeline.prepare, stage=True, needs=lambda a: [(a.raw, "fetch")]),
    "train": Command(train.train, stage=True, backbone=True, needs=_stage_inputs),
    "evaluate": Command(pipeline.evaluate, stage=True, needs=lambda a: [(a.sts, "prepare")] + (
        [(a.model, "stage2")] if _project_folder(a.model) else [])),
    "register": Command(pipeline.register, stage=True, needs=lambda a: [
        (a.model, "stage2"), (str(Path(a.eval_dir) / "metrics.json"), "evaluate")]),
    "promote": Command(pipeline.promote, stage=True, backbone=True, needs=lambda a: [(STS, "prepare")]),
    "compare": Command(studies.compare, stage=True, backbone=True, needs=lambda a: _TABLES),
    "nli-table": Command(studies.nli_table, stage=True, backbone=True, needs=lambda a: _TABLES),
    "baselines": Command(studies.baselines, stage=True, backbone=True, needs=lambda a: _TABLES),
    "search": Command(studies.search, stage=True, backbone=True, needs=_search_inputs),
    "claims": Command(studies.claims, stage=True),
    "preset": Command(studies.preset),
    "profile": Command(studies.profile, stage=True, backbone=True),
    "serve": Command(serving.serve),
    "encode": Command(serving.encode),
    "data": Command(data.data),
    "backbone": Command(serving.backbone),
    "servers": Command(operations.servers),
    "postgres": Command(operations.postgres),
    "worker": Command(operations.worker),
    "deploy": Command(operations.deploy),
    "report": Command(pipeline.report),
    "champion": Command(pipeline.champion),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stsreg",
        description="STS regression pipeline (Translated ReLU / Smooth K2).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
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
        name = load_params(args.params).model.backbone
        if backbones.find(name):
            backbones.resolve_backbone(name)


def configure_logging(verbose: bool = False) -> None:
    """The project's loggers at INFO (DEBUG with --verbose); every other library at WARNING: their INFO lines (ONNX
    Runtime's quantiser logs one per tensor through the root logger, MLflow its store migrations) are noise in a run a
    person reads, their warnings are not."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: "
                                                                                    "%(message)s")
    for name in ("stsreg", "pipelines"):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)


def _end_on_sigterm(signum, frame) -> None:
    """SIGTERM's default (the process ends, status -15), after stopping the ephemeral Prefect server this process
    started, if any. Prefect stops that server at exit, but SIGTERM's default runs no exit handler, and Prefect's own
    handler during a flow ends the process with the handler it found: a stage sent ``kill PID`` left the server (a
    child process: a port and ~200 MB) running after it."""
    server = sys.modules.get("prefect.server.api.server")
    for running in list(getattr(getattr(server, "SubprocessASGIServer", None), "_instances", {}).values()):
        running.stop()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # run as a program (not called with arguments in another's process) whose SIGTERM nobody handles yet
    if argv is None and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _end_on_sigterm)
    if args.command not in ("servers", "postgres"):
        use_running(Path("."))  # local servers up -> log to them; down -> embedded defaults
    configure_logging(args.verbose)
    try:
        if getattr(args, "params", None):
            load_params(args.params)  # the whole file, before any output is touched
        # a stage run out of order stops here, before a flow starts
        check_inputs(args, COMMANDS[args.command].needs(args))
        check_backbone(args)
        if not COMMANDS[args.command].stage:
            return args.func(args)
        with pipeline_lock(Path("."), announce=True):  # a second run started beside this one waits
            return args.func(args)
    except InputError as exc:
        print(f"stsreg {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
