"""``reports/benchmarks-learn.{md,json,png}`` from the rounds :mod:`benchmarks.learn` measured: per round and retrain
kind the task score on the fixed unseen test pairs (with its 95% bootstrap interval), the clock, stage 2's steps and
kept step, the gate's verdict; a plot of the task score per round (warm, cold, and the champion each one serves); the
issue's goal (after the last round, warm within 0.3 of cold at <= 1/3 of cold's stage-2 time) checked either way."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from stsreg.infra import atomic
from stsreg.product.bootstrap_ci import spearman_ci
from stsreg.product.sts_eval import spearman

#: The goal after the last round: warm's task score at most this far below cold's ...
WITHIN = 0.3
#: ... with warm's stage 2 at most this fraction of cold's.
TIME_FRACTION = 1 / 3


def unseen_mask(pairs: pd.DataFrame, sts_path: Path, table: str = "qa") -> np.ndarray:
    """Which fixed test pairs no training table holds, as the last prepare of the whole table marked them (its
    ``table`` test rows' ``seen_in_train``); a pair it does not list counts as seen (left out)."""
    if not sts_path.exists():
        return np.ones(len(pairs), dtype=bool)
    sts = pd.read_parquet(sts_path, columns=["dataset", "split", "sentence1", "sentence2", "seen_in_train"])
    qa = sts[(sts.dataset == table) & (sts.split == "test")]
    unseen = set(zip(qa.sentence1[~qa.seen_in_train], qa.sentence2[~qa.seen_in_train]))
    return np.array([(a, b) in unseen for a, b in zip(pairs.sentence1, pairs.sentence2)], dtype=bool)


def score(row: dict, gold: np.ndarray, mask: np.ndarray) -> tuple[float, list[float]]:
    """(Spearman x100, its 95% bootstrap interval) of a row's cosines on the unseen fixed pairs."""
    pred = np.asarray(row["cosines"])[mask]
    low, high = spearman_ci([(gold[mask], pred)], n_resamples=1000, seed=0)
    return spearman(gold[mask], pred), [round(low, 2), round(high, 2)]


def scored_rows(rows: list[dict], pairs: pd.DataFrame, mask: np.ndarray) -> list[dict]:
    """The rows with ``task_score`` / ``task_ci`` and ``champion_score`` (the score of the champion the kind serves
    after the round), cosines left out."""
    gold = pairs.score.to_numpy(dtype=float)
    out, served = [], {}
    measured = tuple(sorted({r["retrain"] for r in rows} - {"first"}, key=lambda k: k != "warm")) or ("warm",)
    for row in sorted(rows, key=lambda r: (r["round"], r["retrain"] != "first", r["retrain"])):
        task, ci = score(row, gold, mask)
        kinds = measured if row["retrain"] == "first" else (row["retrain"],)
        for kind in kinds:
            if row["promoted"] or kind not in served:  # round 1's v1 is served either way (gate or set by hand)
                served[kind] = round(task, 2)
        new = {k: v for k, v in row.items() if k != "cosines"}
        new.update(task_score=round(task, 2), task_ci=ci, champion_score=served[kinds[0]])
        out.append(new)
    return out


def goal(rows: list[dict]) -> dict:
    """The last round both kinds finished, warm against cold: the task-score gap and the stage-2 time ratio, and
    whether each holds."""
    kinds = {n: {r["retrain"] for r in rows if r["round"] == n} for n in {r["round"] for r in rows}}
    both = [n for n, have in kinds.items() if {"warm", "cold"} <= have]
    if not both:  # the default (warm) alone: does its curve climb, and where did its gate promote?
        warm = [r for r in rows if r["retrain"] in ("first", "warm")]
        return {"round": max(r["round"] for r in rows), "complete": False, "first_score": warm[0]["task_score"],
                "last_score": warm[-1]["task_score"], "rises": warm[-1]["task_score"] > warm[0]["task_score"],
                "warm_promoted_rounds": [r["round"] for r in warm if r["retrain"] == "warm" and r["promoted"]]}
    last = max(both)
    by = {r["retrain"]: r for r in rows if r["round"] == last}
    gap = round(by["warm"]["task_score"] - by["cold"]["task_score"], 2)
    ratio = (round(by["warm"]["stage2_s"] / by["cold"]["stage2_s"], 3)
             if by["warm"].get("stage2_s") and by["cold"].get("stage2_s") else None)
    return {"round": last, "complete": True, "warm_minus_cold": gap, "within": gap >= -WITHIN,
            "stage2_ratio": ratio, "fast_enough": ratio is not None and ratio <= TIME_FRACTION,
            "warm_promoted_rounds": [r["round"] for r in rows if r["retrain"] == "warm" and r["promoted"]],
            "cold_promoted_rounds": [r["round"] for r in rows if r["retrain"] == "cold" and r["promoted"]]}


def plot(rows: list[dict], path: Path, table: str = "qa") -> None:
    """The task score per round: warm and cold retrains (solid, with their intervals) and the champion each serves
    (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(r for r in rows if r["retrain"] == "first")
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for kind, colour in (("warm", "tab:orange"), ("cold", "tab:blue")):
        own = [first] + [r for r in rows if r["retrain"] == kind]
        if len(own) == 1:
            continue
        x = [r["round"] for r in own]
        ax.plot(x, [r["task_score"] for r in own], "o-", color=colour, label=f"{kind} retrain")
        ax.fill_between(x, [r["task_ci"][0] for r in own], [r["task_ci"][1] for r in own], color=colour, alpha=0.12)
        ax.plot(x, [r["champion_score"] for r in own], "--", color=colour, alpha=0.8,
                label=f"champion served ({kind})")
        for r in own[1:]:
            if r["promoted"]:
                ax.annotate("promoted", (r["round"], r["task_score"]), textcoords="offset points", xytext=(0, 7),
                            ha="center", fontsize=7, color=colour)
    ax.set_xlabel("round (1: the first part of the table; then one arrival of rows each)")
    ax.set_ylabel(f"{table} test Spearman x100 (fixed pairs)")
    ax.set_xticks(sorted({r["round"] for r in rows}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _seconds(s) -> str:
    return "-" if s is None else f"{int(s // 60)}:{s % 60:04.1f}"


def _gate_text(row: dict) -> str:
    if row.get("nothing_learned"):
        return "nothing learned: no challenger"
    gate = row.get("gate") or {}
    tests, guards = gate.get("tests") or {}, gate.get("guards") or {}
    parts = [f"{k} {t['diff']:+.2f} [{t['low']:+.2f}, {t['high']:+.2f}] p {t['p_value']:.3f}"
             for k, t in tests.items() if k not in guards]
    parts += [f"guard {k} lower {g['low']:+.2f} {'held' if g['held'] else 'broken'}" for k, g in guards.items()]
    return "; ".join(parts) or "-"


def _first_text(row: dict) -> str:
    first = row.get("first_champion") or {}
    if first.get("set_by_hand"):
        return "v1 against the untouched backbone: kept; set champion by hand (`stsreg champion set 1`)"
    return "v1 against the untouched backbone"


def markdown(rows: list[dict], machine: dict, meta: dict) -> str:
    g, table = meta["goal"], meta.get("table", "qa")
    kinds = meta.get("kinds") or ["warm", "cold"]
    about = meta.get("about") or "The worked example's `qa` table (docs/own_data.md)"
    title = ("warm vs cold retrains, round by round" if "cold" in kinds
             else f"the default (warm) retrain on `{table}`, round by round")
    copies = "in a warm and a cold copy of the same project" if "cold" in kinds else "with the default configuration"
    lines = [f"# The loop that learns: {title}\n",
             f"Machine: {machine['cpu']}; precision {machine['precision']}. {about} arrives in rounds: the first "
             f"{meta['split']['first']:.0%} declared and trained by hand (champion v1), then "
             f"{meta['split']['arrivals']} arrivals, each through the real loop (`stsreg data add` -> the deployment's "
             f"trigger -> retrain -> gate -> the served champion) {copies}. Task score: Spearman x100 of the "
             f"retrain's model on {meta['unseen_pairs']} fixed `{table}` test pairs (of {meta['fixed_pairs']}; the "
             "unseen ones), 95% bootstrap interval. Gate: "
             + ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in (meta.get("gate") or {}).items()) + ".\n",
             f"The settings a plain `stsreg data add` retrains with (params.yaml's `stage2.warm_start`, unchanged by "
             f"the overrides): {meta.get('warm_start') or '-'}.\n",
             f"Overrides of every project (a cut recipe): {', '.join(f'`{o}`' for o in meta['overrides']) or 'none'}."
             f" The plot of the task score per round: `{meta.get('png', 'reports/benchmarks-learn.png')}`.\n",
             "| round | retrain | rows added | stage 2 (min:s) | steps | kept step | dev start -> kept | task score "
             "[95% CI] | champion served | avg7 unseen | gate | promoted | loop clock (min:s) |",
             "|---:|---|---:|---:|---:|---:|---|---|---:|---:|---|---|---:|"]
    for r in rows:
        dev = (f"{r['dev_start']:.2f} -> {r['dev_kept']:.2f}" if r.get("dev_start") is not None else "-")
        avg7 = f"{r['avg7_unseen']:.2f}" if r.get("avg7_unseen") is not None else "-"
        lines.append(f"| {r['round']} | {r['retrain']} | {r.get('rows_added') or '-'} | {_seconds(r.get('stage2_s'))} "
                     f"| {r.get('steps') or '-'} | {r.get('kept_step')} | {dev} | {r['task_score']:.2f} "
                     f"[{r['task_ci'][0]:.2f}, {r['task_ci'][1]:.2f}] | {r['champion_score']:.2f} | {avg7} | "
                     f"{_gate_text(r) if r['retrain'] != 'first' else _first_text(r)} | "
                     f"{'yes' if r['promoted'] else 'no'} | {_seconds(r.get('clock_s'))} |")
    done = max(r["round"] for r in rows) - 1
    if done < meta["split"]["arrivals"]:
        suffix = "" if table == "qa" else f"-{table}"
        lines += ["", f"Measured: {done} of the {meta['split']['arrivals']} arrivals (the run stopped after round "
                  f"{done + 1}; `make bench-learn{suffix}` continues it from `build/bench-learn{suffix}/rounds.json`)."]
    first = next((r.get("first_champion") or {} for r in rows if r["retrain"] == "first"), {})
    if first.get("reason"):
        lines += ["", f"Round 1's gate, v1 against the untouched backbone: {first['reason']}."
                  + (" v1 was then set champion by hand, so that both kinds start from it." if first.get("set_by_hand")
                     else "")]
    if meta.get("note"):
        lines += ["", f"**Read the times with this:** {meta['note']}"]
    if g.get("complete"):
        lines += ["", f"After the last round (round {g['round']}): warm {g['warm_minus_cold']:+.2f} against cold on "
                  f"the task ({'within' if g['within'] else 'NOT within'} {WITHIN}), stage 2 at "
                  f"{g['stage2_ratio']:.2f}x cold's time ({'<=' if g['fast_enough'] else '>'} 1/3). Warm promoted in "
                  f"rounds {g['warm_promoted_rounds'] or 'none'}; cold in rounds "
                  f"{g['cold_promoted_rounds'] or 'none'}."]
    elif "first_score" in g:
        lines += ["", f"After the last round (round {g['round']}): the default retrain's task score "
                  f"{g['first_score']:.2f} -> {g['last_score']:.2f} ({'rose' if g['rises'] else 'did NOT rise'}); "
                  f"promoted in rounds {g['warm_promoted_rounds'] or 'none'}."]
    else:
        lines += ["", f"Round {g['round']} is not complete for both kinds: the goal is not judged."]
    return "\n".join(lines) + "\n"


def first_champion(project: Path) -> dict:
    """How version 1 became the champion both kinds start from, from the project's registry: its gate decision and
    reason, and the ``champion set`` by hand when the gate kept it."""
    from stsreg.infra import tracking
    from stsreg.product.registry import MODEL_NAME

    if not (project / "mlflow/mlflow.db").exists():
        return {}
    tags = tracking.client(tracking.embedded_uri(project)).get_model_version(MODEL_NAME, "1").tags
    return {"decision": tags.get("promotion.decision"), "reason": tags.get("promotion.reason"),
            "set_by_hand": tags.get("champion.set_by_hand")}


def write(rows: list[dict], pairs: pd.DataFrame, projects: dict[str, Path], table, about: dict, out: Path,
          note: str = "") -> str:
    """Score, judge, plot and write the report files. ``table``: the :class:`benchmarks.learn_data.LearnTable`;
    ``about``: the run's ``overrides``, ``split`` and ``kinds``; ``note``: what else ran on the machine. Returns the
    markdown."""
    import yaml

    from stsreg.infra.tracking import cpu_name

    last = projects.get("cold", projects["warm"])
    mask = unseen_mask(pairs, last / "data/prepared/sts.parquet", table.name)
    first = first_champion(projects["warm"])
    rows = [{**r, "promoted": first.get("decision", "promoted") == "promoted", "first_champion": first}
            if r["retrain"] == "first" else r for r in rows]
    done = scored_rows(rows, pairs, mask)
    precision = sorted({r["precision"] for r in done if r.get("precision")})
    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "precision": ", ".join(precision) or "?"}
    for r in done:
        r["cpu"] = machine["cpu"]
    default = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())["stage2"]["warm_start"]
    meta = {"goal": goal(done), "overrides": about.get("overrides", []), "split": about.get("split", {}),
            "fixed_pairs": len(pairs), "unseen_pairs": int(mask.sum()), "note": note, "table": table.name,
            "about": table.about, "gate": table.gate, "kinds": about.get("kinds", ["warm", "cold"]),
            "warm_start": ", ".join(f"`{k}: {v}`" for k, v in default.items()),
            "png": f"reports/{out.with_suffix('.png').name}"}
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(done, out.with_suffix(".png"), table.name)
    text = markdown(done, machine, meta)
    atomic.write_text(out.with_suffix(".md"), text)
    atomic.write_json(out.with_suffix(".json"), {"machine": machine, **meta, "rows": done})
    return text


def main(argv: list[str] | None = None) -> int:
    """Rewrite the report from a finished run's ``rounds.json`` (``python -m benchmarks.learn_report DIR``)."""
    import argparse

    from benchmarks.learn_data import TABLES

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--out", type=Path, help="default reports/benchmarks-learn (-TABLE for another table)")
    ap.add_argument("--note", default="", help="what else ran on the machine during the rounds (kept in the report)")
    a = ap.parse_args(argv)
    state = json.loads((a.dir / "rounds.json").read_text())
    state["note"] = a.note or state.get("note", "")
    table = TABLES[state.get("table", "qa")]
    kinds = state.get("kinds", ["warm", "cold"])
    suffix = "" if table.name == "qa" else f"-{table.name}"
    out = a.out or Path(__file__).resolve().parents[1] / f"reports/benchmarks-learn{suffix}"
    print(write(state["rows"], table.test_pairs(a.dir), {k: a.dir / k for k in kinds}, table,
                {**state, "kinds": kinds}, out, state["note"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
