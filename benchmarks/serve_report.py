"""``reports/benchmarks-serve.md`` from the results of :mod:`benchmarks.serve_load`: every row, then the targets."""

from __future__ import annotations

#: The targets: ``stsreg serve`` with its default settings (``auto``) against the best Infinity row at every
#: concurrency (short texts), batch-1 p50 against Infinity's best, long texts against the best peer, the tail.
OVER_INFINITY, TAIL, DEFAULT = 1.2, 10.0, "stsreg serve auto"
#: A peer row serves the same model when its vectors score within this of the best row's STS-B test Spearman (the
#: bound registration holds our own exports to, ``serve.max_avg7_drop``); a faster row computing something else is
#: shown, not judged against.
SAME_MODEL = 0.3


def _f(x, fmt=".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _best(rows: list[dict], cell: str) -> dict | None:
    rows = [r for r in rows if cell in r["cells"]]
    return max(rows, key=lambda r: r["cells"][cell]["req_s"]) if rows else None


def _targets(results: dict) -> list[str]:
    servers = results["servers"]
    ours = next((r for r in servers if r["name"] == DEFAULT), None)
    if ours is None:
        return [f"- not judged: no `{DEFAULT}` row in this run"]
    scored = [r["quality"]["spearman"] for r in servers if r.get("quality")]
    same = lambda r: not r.get("quality") or max(scored) - r["quality"]["spearman"] <= SAME_MODEL  # noqa: E731
    infinity = [r for r in servers if r["name"].startswith("Infinity") and same(r)]
    peers = infinity + [r for r in servers if r["name"] == "mlflow models serve"]
    stsreg = [r for r in servers if r["name"].startswith("stsreg serve")]
    lines = [f"- not judged against (another computation): {r['name']}, STS-B test {r['quality']['spearman']:.2f}, "
             f"{max(scored) - r['quality']['spearman']:.2f} below the best row's {max(scored):.2f} (bound "
             f"{SAME_MODEL:g}); beside it `{DEFAULT}` serves " + ", ".join(
                 f"{ours['cells'][c]['req_s'] / r['cells'][c]['req_s']:.2f}x at {c}" for c in ours["cells"]
                 if c in r["cells"])
             for r in servers if r.get("quality") and not same(r)]

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"- {'met' if ok else 'MISSED'}: {text}")

    for cell in sorted(ours["cells"], key=lambda c: (c.split("/")[0] != "short", int(c.split("/")[1]))):
        texts, clients = cell.split("/")
        mine = ours["cells"][cell]["req_s"]
        if texts == "short" and (best := _best(infinity, cell)):
            theirs = best["cells"][cell]["req_s"]
            verdict(mine >= OVER_INFINITY * theirs, f"short texts, {clients} clients: {mine:.1f} req/s = "
                    f"{mine / theirs:.2f}x {best['name']}'s {theirs:.1f} (target >= {OVER_INFINITY:g}x)")
        if texts == "long" and (best := _best(peers, cell)):
            theirs = best["cells"][cell]["req_s"]
            verdict(mine >= theirs, f"long texts, {clients} clients: {mine:.1f} req/s = {mine / theirs:.2f}x "
                    f"{best['name']}'s {theirs:.1f} (target >= 1x the best peer)")
    if infinity and "short/1" in ours["cells"]:
        fastest = min(infinity, key=lambda r: r["cells"]["short/1"]["p50_ms"])
        mine, theirs = ours["cells"]["short/1"]["p50_ms"], fastest["cells"]["short/1"]["p50_ms"]
        verdict(mine <= theirs, f"batch-1 p50 (1 client, short) {mine:.2f} ms vs {fastest['name']}'s {theirs:.2f} ms "
                "(target <= Infinity's best)")
    worst = max(ours["cells"].items(), key=lambda kv: kv[1]["p99_ms"] / kv[1]["p50_ms"])
    verdict(worst[1]["p99_ms"] < TAIL * worst[1]["p50_ms"], f"worst tail {worst[1]['p99_ms']:.1f} ms p99 = "
            f"{worst[1]['p99_ms'] / worst[1]['p50_ms']:.1f}x p50 ({worst[0]}; target < {TAIL:g}x in every cell)")
    errors = sum(c["errors"] for r in stsreg for c in r["cells"].values())
    verdict(errors == 0, f"{errors} errors over every stsreg serve row (target 0)")
    raw = max(results["raw"], key=lambda r: r["sets"]["short"]["pairs_s"], default=None)
    if raw and "short/32" in ours["cells"]:
        lines.append(f"- for reading: at 32 clients `{DEFAULT}` serves {ours['cells']['short/32']['req_s']:.0f} "
                     f"pairs/s, {ours['cells']['short/32']['req_s'] / raw['sets']['short']['pairs_s']:.0%} of the "
                     f"fastest raw encoder's {raw['sets']['short']['pairs_s']:.0f} ({raw['name']})")
    return lines


def _quality(results: dict) -> list[str]:
    """What each embedding server computed (:mod:`benchmarks.serve_quality`)."""
    rows = [r for r in results["servers"] if r.get("quality")]
    if not rows:
        return []
    n = rows[0]["quality"]["pairs"]
    return ["", "## What each embedding server computed", "",
            f"STS-B test Spearman x100 of the served vectors' cosines on {n} test pairs (one pair per request), and "
            "the largest move of a sentence's vector (share of its norm) between asking for it alone and inside a "
            "request of 64 sentences.", "", "| server | STS-B test Spearman | alone vs in a batch |", "|---|---:|---:|",
            *(f"| {r['name']} | {r['quality']['spearman']:.2f} | {r['quality']['batch_moved']:.1e} |" for r in rows)]


def _auto(results: dict) -> list[str]:
    """What ``auto`` chose and why, as the server answered it at ``GET /metadata``."""
    row = next((r for r in results["servers"] if r["name"] == DEFAULT and r.get("auto")), None)
    return ["", "## What `auto` chose (its `GET /metadata`)", "", row["auto"]["why"]] if row else []


def best_passes(servers: list[dict]) -> list[dict]:
    """One row per server name: a server measured in several passes (``serve_load --again``) keeps, per cell, the
    pass with the most req/s (noise from other work on a shared machine only slows a server), and says how many
    passes it had."""
    merged: dict[str, dict] = {}
    for row in servers:
        if row["name"] not in merged:
            merged[row["name"]] = {**row, "cells": dict(row["cells"]), "passes": 1}
            continue
        kept = merged[row["name"]]
        kept["passes"] += 1
        for cell, c in row["cells"].items():
            if cell not in kept["cells"] or c["req_s"] > kept["cells"][cell]["req_s"]:
                kept["cells"][cell] = c
        if row.get("quality"):
            kept["quality"] = row["quality"]
    return list(merged.values())


def format_report(results: dict) -> str:
    results = {**results, "servers": best_passes(results["servers"])}
    m = results["machine"]
    gpu = f"{m['gpu']} (torch on the GPU; the servers and the client on its host) and " if m.get("gpu") else ""
    lines = [
        "# Served benchmark",
        "",
        f"`make bench-serve` on {gpu}{m['cpu']} ({m['cores']} cores, {m['threads']} threads per server and for the "
        f"raw "
        f"encoder; CPU flags {', '.join(m.get('cpu_flags') or ['not recorded'])}; native bf16: "
        f"{m.get('native_bf16', 'not recorded')}), "
        f"{m['date']}; {results['seconds']:g} s of load per cell, one pair (two texts) per request, "
        + (f"{results['client']} on the same machine, its own CPU per cell in the table"
           if results.get("client") else "a bounded async client (httpx) on the same machine")
        + " (it takes CPU from the server: the ratios, not the absolute numbers, carry to other machines).",
        *(["", results["note"]] if results.get("note") else []),
        "",
        "## Raw encoder (the limit)",
        "",
        "| backend | short: batch-1 p50 ms | short: pairs/s (64 per call) | long: batch-1 p50 ms | long: pairs/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results["raw"]:
        s, lo = r["sets"]["short"], r["sets"]["long"]
        lines.append(f"| {r['backend']} | {s['p50_ms']:.2f} | {s['pairs_s']:.0f} | {lo['p50_ms']:.2f} | "
                     f"{lo['pairs_s']:.0f} |")
    lines += ["", "## Servers", "", "| server | computes | texts | clients | req/s (= pairs/s) | p50 ms | p95 ms | p99 "
                                    "ms | errors | client CPU |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results["servers"]:
        computes = ", ".join(str(v) for v in r["computes"].values()) or "-"
        computes += f" (best of {r['passes']} passes)" if r.get("passes", 1) > 1 else ""
        for cell, c in r["cells"].items():
            texts, clients = cell.split("/")
            lines.append(f"| {r['name']} | {computes} | {texts} | {clients} | {c['req_s']:.1f} | {_f(c['p50_ms'])} | "
                         f"{_f(c['p95_ms'])} | {_f(c['p99_ms'])} | {c['errors']} | {_f(c.get('client_cpu'), '.2f')} |")
    from benchmarks.serve_breakdown import table

    lines += _quality(results)
    lines += [line for r in results["servers"] if r["name"] == DEFAULT for line in table(r)]
    return "\n".join(lines + _auto(results) + _flood(results) + ["", f"## Targets (`{DEFAULT}`, its default settings)",
                                                                  "", *_targets(results), ""])


def _flood(results: dict) -> list[str]:
    """The flood rows (:mod:`benchmarks.serve_flood`), when given: their table under a heading of this report."""
    if "flood" not in results:
        return []
    from benchmarks.serve_flood import report

    flood = results["flood"]
    return ["", "## Under a flood", ""] + report(flood["rows"], flood["machine"]).splitlines()[2:]
