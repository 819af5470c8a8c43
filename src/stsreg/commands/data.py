"""``stsreg data check | add``: your own scored-pair tables, the parser beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path
from stsreg.commands import PARAMS_HELP
from stsreg.infra.config import Params, load_params
from stsreg.infra.errors import InputError


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
    dc.add_argument("--skip-bad", action="store_true",
                    help="add: rows prepare would reject (each judged on its own) are left out and listed, the others "
                         "added (default: any such row refuses the whole add, naming every line)")
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
    dc.add_argument("--encoding", default=None,
                    help="the file's encoding, e.g. cp1252 (check default auto: a byte-order mark, else UTF-8; add "
                         "default: UTF-8, else the table's declared encoding)")
    dc.add_argument("--wait-s", type=float, default=3600.0, metavar="SECONDS",
                    help="add: how long to wait for a running stage or `dvc repro` in the project (it says what it "
                         "waits for); then nothing is written (default 3600)")
    dc.add_argument("--no-wait", action="store_true",
                    help="add: refuse at once, writing nothing, when a stage or `dvc repro` runs in the project")
    dc.add_argument("--dev-fraction", type=float, default=0.1, help="hash splits: share of pairs in dev")
    dc.add_argument("--test-fraction", type=float, default=0.1, help="hash splits: share of pairs in test")
    dc.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    from stsreg.product.data.check import TableToCheck, check

    if args.action == "add":
        return _data_add(args)
    params = load_params(args.params) if Path(args.params).is_file() else None
    x0 = params.stage2.x0 if params else None
    cap = (params or Params()).prepare.max_rejected_fraction
    given = TableToCheck(args.file, args.sentence1, args.sentence2, args.score, args.split, args.scale, args.d,
                         args.name, args.dev_fraction, args.test_fraction, args.encoding or "auto")
    print(check(given, x0, cap))
    return 0


def _data_add(args: argparse.Namespace) -> int:
    """``stsreg data add ROWS --table NAME``: append (after the same checks prepare makes), then emit the event."""
    from pipelines.product.data_events import add_and_emit
    from stsreg.product.data.append import AddRequest

    prepare = load_params(args.params).prepare
    request = AddRequest(args.table, Path(args.file), args.duplicates, prepare.max_rejected_fraction,
                         skip_bad=args.skip_bad, encoding=args.encoding, wait_s=0.0 if args.no_wait else args.wait_s)
    try:
        table, added, event = add_and_emit(Path("."), prepare.sts_tables, request)
    except TimeoutError as exc:
        raise InputError(f"{args.file}: not added to --table {args.table}: {exc}") from None
    dups = (f"; {len(added.duplicates)} row(s) already in the table or repeated, skipped (lines "
            f"{', '.join(map(str, added.duplicates[:10]))}{' ...' if len(added.duplicates) > 10 else ''})"
            if added.duplicates else "")
    bad = (f"; {len(added.skipped)} row(s) prepare would reject, left out (--skip-bad): "
           + "; ".join(f"line {line}: {why}" for line, why in added.skipped[:20])
           + (" ..." if len(added.skipped) > 20 else "") if added.skipped else "")
    read = "UTF-8 or its byte-order mark" if added.encoding == "auto" else added.encoding
    print(f"added {added.added} rows to {table.file} ({table.name}; read as {read}, appended as {added.dialect})"
          f"{dups}{bad}; {event}")
    return 0
