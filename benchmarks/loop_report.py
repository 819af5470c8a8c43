"""``reports/benchmarks-loop.{md,json}`` from what :mod:`benchmarks.loop` measured: the machine, the phases of the
loop's clock, the load's view of the swap, the target."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stsreg.infra import atomic
from stsreg.product.loop_clock import format_clock
from stsreg.product.runners.warm_start import warm_text

#: The loop's target on 2 CPU cores with native bf16 (minutes, from the rows added to the new champion answering).
TARGET_MIN = 15.0


def _stage2(project: Path) -> dict:
    """The retrain's stage 2 (its ``training_summary.json``): where it started, its steps and the dev scores (x100)."""
    path = project / "models/stage2/training_summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    keys = ("precision", "steps", "start_dev_spearman", "best_dev_spearman", "best_step", "started_from")
    return {k: summary.get(k) for k in keys}


def _gate(project: Path) -> dict:
    """The retrain's gate (``reports/registry/promotion.json``: each judged metric's gain over the champion, x100, with
    its 95% interval) and its evaluation (``reports/eval/metrics.json``: avg7, unseen avg7, the dev table's score)."""
    read = [json.loads(p.read_text()) if p.exists() else {}
            for p in (project / "reports/registry/promotion.json", project / "reports/eval/metrics.json")]
    return {"tests": read[0].get("tests", {}), "champion": read[0].get("champion"),
            "metrics": {k: v for k, v in read[1].items() if k.endswith("_spearman") and "_low" not in k}}


def _machine(stage2: dict) -> dict:
    from stsreg.infra.tracking import cpu_name

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "precision": stage2.get("precision") or "?"}


def _stage2_line(st: dict) -> str:
    origin = st.get("started_from") or {"from": "stage1"}
    start = (f"from {warm_text(origin)}" if origin["from"] == "champion" else
             "from stage 1 (a cold retrain" + (f": {origin['why']})" if origin.get("why") else ")"))
    if st.get("steps") is None:
        return "- Stage 2: no summary found."
    return (f"- Stage 2 started {start}: {st['steps']} steps; dev Spearman x100 {st['start_dev_spearman']:.2f} at "
            f"step 0, {st['best_dev_spearman']:.2f} kept (step {st['best_step']}).")


def summarise(measured: dict, overrides: list[str]) -> dict:
    """The report's numbers: the clock's total and the load's own end (its first answer from the new version)."""
    report, load = measured["report"], measured["load"]
    origin = measured["data_added_at"]
    answered = measured.get("load_new_version_at")
    by_hand = measured.get("swap_by_hand")
    stage2 = _stage2(Path(measured["project"]))
    out = {"machine": _machine(stage2), "stage2": stage2, "gate": _gate(Path(measured["project"])),
           "overrides": overrides,
           "about": measured.get("about") or f"`{measured['project']}`",
           "stack": measured.get("stack", "embedded (SQLite)"),
           "rows_added": (report.get("trigger") or {}).get("rows_added"), "data_add_s": measured["data_add_s"],
           "serve_ready_s": measured["serve_ready_s"],
           "round1_s": measured.get("round1_s"), "promoted_by_gate": report.get("promoted"),
           "swap_by_hand": by_hand, "summary": report.get("summary"), "clock": report.get("clock"),
           "served": report.get("served"), "load": load, "load_every_s": measured.get("load_every_s"),
           "new_version_answered_s": round(answered - origin, 1) if answered else None,
           "swap_s": round(answered - by_hand["set_at"], 1) if by_hand and answered else None}
    # the loop ends when the load first got an answer from the new version; by hand, the gate's end stands instead
    end = (report["clock"]["phases"][-1]["end"] if by_hand else answered) or report["clock"]["phases"][-1]["end"]
    out["total_min"] = round((end - origin) / 60, 2)
    return out


def _cpu(machine: dict) -> str:
    """The CPU's name with its core count (once: some names carry it)."""
    return machine["cpu"] + ("" if "cores" in machine["cpu"] else f", {machine['cores']} cores")


def markdown(s: dict, clock_table: str) -> str:
    m, load = s["machine"], s["load"]
    bf16 = "bf16" in str(m["precision"])
    verdict = (("met" if s["total_min"] <= TARGET_MIN else "MISSED") if bf16 else
               f"not judged here: this CPU trains in {m['precision']}; the target is for native bf16")
    lines = [
        "# The loop's clock (`make bench-loop`)", "",
        f"Machine: {_cpu(m)}; stage 2 precision {m['precision']}. The project: {s['about']}"
        + (f"; overrides: {', '.join(f'`{o}`' for o in s['overrides'])}" if s["overrides"] else "") + ". "
        f"The servers' stores: {s.get('stack', 'embedded (SQLite)')}.", "",
        f"- `stsreg data add` of {s['rows_added']} rows took {s['data_add_s']:.1f} s; `stsreg serve` was ready in "
        f"{s['serve_ready_s']:.1f} s before the loop began.",
        _stage2_line(s["stage2"]),
        f"- Outcome: {s['summary']}",
    ]
    if s["swap_by_hand"]:
        lines.append(f"- The gate kept the champion, so the swap was timed after `stsreg champion set "
                     f"{s['swap_by_hand']['version']}`: the server answered with it {s['swap_s']} s after the command "
                     "returned. The total stops at the gate's decision.")
    lines += ["", "## Phases (the retrain report's clock)", "", clock_table, "",
              "## The server under load", "",
              f"A `POST /similarity` of 2 pairs every {s['load_every_s']:g} s throughout: {load['sent']} sent, "
              f"**{load['failed']} failed**; p50 {load['p50_ms']} ms, p99 {load['p99_ms']} ms, max {load['max_ms']} "
              f"ms. First answer from the new version: {s['new_version_answered_s']} s after the rows were added.", "",
              "## Target", "",
              f"From the rows added to the new champion answering: **{s['total_min']:.1f} min** (target <= "
              f"{TARGET_MIN:g} min on 2 cores with native bf16): {verdict}."]
    if load["errors"]:
        lines += ["", "Failed requests:", "", *[f"- {e}" for e in load["errors"]]]
    return "\n".join(lines) + "\n"


def write(measured: dict, overrides: list[str], out: Path) -> str:
    """Write ``out``.json (every measurement) and ``out``.md; returns the markdown."""
    s = summarise(measured, overrides)
    text = markdown(s, format_clock(measured["report"]))
    atomic.write_json(out.with_suffix(".json"), {**s, "measured": measured})
    atomic.write_text(out.with_suffix(".md"), text)
    return text


def _took(s: dict, phase: str) -> str:
    from stsreg.product.loop_clock import clock_time

    took = [p["seconds"] for p in (s.get("clock") or {}).get("phases", []) if p["phase"] == phase]
    return clock_time(took[0]) if took else "-"


def compare(runs: dict[str, dict]) -> str:
    """A markdown table of retrains measured on the same example (``runs``: label -> a report's json, as
    :func:`write` saves it): where stage 2 started, its steps and time, the dev score it kept, the gate's gains over
    the champion with their intervals, and the loop's total."""
    tables = sorted({t for s in runs.values() for t in s["gate"]["tests"]})
    head = ["retrain", "stage 2 from", "steps", "stage 2", "dev kept (step 0)",
            *[f"gate: {t} gain [95% CI]" for t in tables], "promoted", "clock"]
    first = next(iter(runs.values()))
    m = first["machine"]
    lines = [f"Machine: {_cpu(m)}, stage 2 in {m['precision']}; overrides of every run: "
             + (", ".join(f"`{o}`" for o in first["overrides"] if "warm_start" not in o) or "none")
             + ". Gains: x100 Spearman over the run's champion on the test pairs its gate judges. The clock runs "
             "from the rows added to the server answering a promoted version, or to the gate's decision when it kept "
             "the champion.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, s in runs.items():
        st, tests = s["stage2"], s["gate"]["tests"]
        origin = st.get("started_from") or {"from": "stage1"}
        start = f"champion v{origin['version']}" if origin["from"] == "champion" else "stage 1"
        if "rows" in origin:  # a warm retrain: the rows it trained
            r = origin["rows"]
            start += f": {r['new']:,} new + {r['replayed']:,} of {r['old']:,} old rows"
        gains = [f"{tests[t]['diff']:+.2f} [{tests[t]['low']:+.2f}, {tests[t]['high']:+.2f}]" if t in tests else "-"
                 for t in tables]
        lines.append("| " + " | ".join([label, start, str(st["steps"]), _took(s, "stage2"),
                                         f"{st['best_dev_spearman']:.2f} ({st['start_dev_spearman']:.2f})", *gains,
                                         "yes" if s["promoted_by_gate"] else "no", f"{s['total_min']:.1f} min"])
                     + " |")
    return "\n".join(lines) + "\n"


def phases(runs: dict[str, dict]) -> str:
    """The clock phase by phase, one column per run and, for two runs, the second's time over the first's: where a
    change of stack (the servers' stores, the data remote) costs, rather than where training does."""
    from stsreg.product.loop_clock import clock_time

    took = {label: {p["phase"]: p["seconds"] for p in (s.get("clock") or {}).get("phases", [])}
            for label, s in runs.items()}
    labels = list(runs)
    ratio = len(labels) == 2
    head = ["phase", *labels, *([f"{labels[1]} / {labels[0]}"] if ratio else [])]
    lines = ["The servers' stores: " + "; ".join(f"{label}: {runs[label].get('stack', 'embedded (SQLite)')}"
                                                for label in labels) + ".", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    names = list(dict.fromkeys(p for t in took.values() for p in t))
    totals = {label: sum(took[label].values()) for label in labels}
    for name, row in [*[(n, {label: took[label].get(n) for label in labels}) for n in names], ("total", totals)]:
        cells = [clock_time(row[label]) if row[label] is not None else "-" for label in labels]
        if ratio:
            a, b = row[labels[0]], row[labels[1]]
            cells.append(f"{b / a:.2f}x" if a and b is not None and a >= 1 else "-")
        lines.append("| " + " | ".join([f"**{name}**" if name == "total" else name, *cells]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Compare retrains measured by make bench-loop on the same example.")
    ap.add_argument("runs", nargs="+", metavar="LABEL=REPORT.json", help="e.g. cold=reports/benchmarks-loop-cold.json")
    ap.add_argument("--out", type=Path, required=True, help="the markdown table's file")
    a = ap.parse_args(argv)
    runs = {label: json.loads(Path(path).read_text()) for label, _, path in (r.partition("=") for r in a.runs)}
    text = compare(runs)
    if len({s.get("stack", "embedded (SQLite)") for s in runs.values()}) > 1:  # stacks compared: phase by phase
        text += "\nThe clock phase by phase (min:s; the phases sum to the total, the load's wait for the swap " \
                "aside):\n\n" + phases(runs)
    atomic.write_text(a.out, text)
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
