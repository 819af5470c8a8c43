"""The retrain's report: what a run changed in the registry and the data, and its clock.

Written by the retrain flow (:mod:`pipelines.product.ops_flow`) to ``reports/retrain/last_run.json`` (+ one line in
``history.jsonl``: an audit trail of the schedule) and as the flow run's Prefect markdown artifact.
"""

from __future__ import annotations

import json
from pathlib import Path

from stsreg.infra import atomic, tracking
from stsreg.product import registry
from stsreg.product.loop_clock import format_clock
from stsreg.product.registry import MODEL_NAME
from stsreg.product.runners.warm_start import nothing_learned_text, origin_of, warm_text


def registry_state(uri: str, name: str = MODEL_NAME) -> dict:
    """``{"latest", "champion", "challenger"}`` version numbers (None where absent)."""
    c = tracking.client(uri)
    state = {"latest": max((int(v.version) for v in c.search_model_versions(f"name='{name}'")), default=None)}
    for alias in ("champion", "challenger"):
        v = registry.version_by_alias(c, name, alias)
        state[alias] = int(v.version) if v else None
    return state


def pairs(sts_file: Path):
    """The prepared STS table's pairs (None before the first prepare): what the retrain compares to say which tables
    gained or lost rows."""
    import pandas as pd

    from stsreg.product.data.schemas import ROW_KEY

    return pd.read_parquet(sts_file, columns=ROW_KEY) if sts_file.exists() else None


def tables_line(changed: dict) -> str:
    if not changed:
        return ""
    parts = [f"{t} +{c['added']}/-{c['removed']}" for t, c in sorted(changed.items())]
    return "tables changed (rows added/removed): " + ", ".join(parts) + ". "


def stage2_origin(project: Path, ran: list[str]) -> dict | None:
    """Where the run's stage 2 started (``models/stage2/training_summary.json``'s ``started_from``: stage 1, or the
    champion of a warm retrain), or None when stage 2 did not run."""
    return origin_of(project / "models/stage2") if "stage2" in ran else None


def describe(before: dict, after: dict, ran: list[str], promotion: dict | None, origin: dict | None = None,
             learned_nothing: dict | None = None, dev_table: str = "the") -> str:
    """One paragraph: what the run changed in the registry, and why (``origin``: :func:`stage2_origin`;
    ``learned_nothing``: :func:`stsreg.product.runners.warm_start.nothing_learned` when the chain ended after stage 2,
    ``dev_table`` the split it was judged on)."""
    if not ran:
        return "nothing was stale: no stage ran, the registry is unchanged (champion v%s)" % after["champion"]
    text = f"stages run: {', '.join(ran)}. "
    if origin and origin.get("from") == "champion":
        text += f"stage 2 continued {warm_text(origin)}. "
    elif origin and origin.get("why"):
        text += f"stage 2 started from stage 1: {origin['why']}. "
    if learned_nothing:
        return text + (f"{nothing_learned_text(learned_nothing, dev_table)}; champion stays v{after['champion']} "
                       "(evaluate, register and promote not run: they would judge a copy of it)")
    if after["latest"] != before["latest"]:
        text += f"new version v{after['latest']} registered as challenger; "
        if after["champion"] != before["champion"]:
            text += f"promoted to champion (was v{before['champion']})"
        else:
            text += f"not promoted, champion stays v{after['champion']}"
        if promotion and promotion.get("challenger") == after["latest"]:
            text += f": {promotion['reason']}"
    else:
        text += f"no new version (the model did not change); champion v{after['champion']}"
    return text


def write(project: Path, report: dict) -> None:
    """``reports/retrain/last_run.json`` (atomic), a line of ``history.jsonl`` and the Prefect artifact."""
    from prefect.artifacts import create_markdown_artifact

    out = project / "reports/retrain/last_run.json"
    atomic.write_json(out, report)
    with open(out.with_name("history.jsonl"), "a") as fh:
        fh.write(json.dumps(report) + "\n")
    before, after = report["before"], report["after"]
    create_markdown_artifact(key="retrain-report", description="What this retrain changed, and its clock", markdown=(
        f"## Retrain report\n\n{report['summary']}\n\n| | latest | champion | challenger |\n|---|---|---|---|\n"
        f"| before | {before['latest']} | {before['champion']} | {before['challenger']} |\n"
        f"| after | {after['latest']} | {after['champion']} | {after['challenger']} |\n\n"
        f"### Clock\n\n{format_clock(report)}\n"))
