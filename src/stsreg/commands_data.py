"""The command layer's ``stsreg data check | add``: a table of yours previewed, or rows appended to it (then the event
that starts a retrain)."""

from __future__ import annotations

import argparse
from pathlib import Path

from stsreg.infra.config import load_params


def cmd_data(args: argparse.Namespace) -> int:
    from stsreg.product.data.check import check

    if args.action == "add":
        return _data_add(args)
    x0 = load_params(args.params).stage2.x0 if Path(args.params).is_file() else None
    print(check(args.file, args.sentence1, args.sentence2, args.score, args.split, args.scale, args.d, args.name,
                args.dev_fraction, args.test_fraction, x0))
    return 0


def _data_add(args: argparse.Namespace) -> int:
    """``stsreg data add ROWS --table NAME``: append (after the same checks prepare makes), then emit the event."""
    from pipelines.product.data_events import add_rows

    table, added, event = add_rows(Path("."), load_params(args.params).prepare.sts_tables, args.table, Path(args.file),
                                   args.duplicates)
    dups = (f"; {len(added.duplicates)} row(s) already in the table or repeated, skipped (lines "
            f"{', '.join(map(str, added.duplicates[:10]))}{' ...' if len(added.duplicates) > 10 else ''})"
            if added.duplicates else "")
    print(f"added {added.added} rows to {table.file} ({table.name}; appended as {added.dialect}){dups}; {event}")
    return 0
