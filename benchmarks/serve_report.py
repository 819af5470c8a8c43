"""``reports/benchmarks-serve.md`` from the results of :mod:`benchmarks.serve_load`: every row, then the targets."""

from __future__ import annotations

#: The targets of the served path (at 32 clients, short pairs).
RAW_SHARE, LATENCY_GAP_MS, OVER_MLFLOW, TAIL = 0.70, 2.0, 5.0, 10.0


def _f(x, fmt=".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _targets(results: dict) -> list[str]:
    stsreg = [r for r in results["servers"] if r["name"].startswith("stsreg serve")]
    mlflow = next((r for r in results["servers"] if r["name"] == "mlflow models serve"), None)
    best = max(stsreg, key=lambda r: r["cells"]["short/32"]["req_s"])
    raw = max(results["raw"], key=lambda r: r["sets"]["short"]["pairs_s"])
    raw_same = next((r for r in results["raw"] if r["backend"] == best["computes"].get("backend")), raw)
    served, limit = best["cells"]["short/32"]["req_s"], raw["sets"]["short"]["pairs_s"]
    gap = best["cells"]["short/1"]["p50_ms"] - raw_same["sets"]["short"]["p50_ms"]
    c32 = best["cells"]["short/32"]
    errors = sum(c["errors"] for r in stsreg for c in r["cells"].values())

    def verdict(ok: bool, text: str) -> str:
        return f"- {'met' if ok else 'MISSED'}: {text}"

    lines = [
        verdict(
            served >= RAW_SHARE * limit,
            f"{best['name']} at 32 clients serves {served:.0f} pairs/s = "
            f"{served / limit:.0%} of the raw encoder's {limit:.0f} ({raw['name']}; target >= {RAW_SHARE:.0%})",
        ),
        verdict(
            gap <= LATENCY_GAP_MS,
            f"batch-1 p50 {best['cells']['short/1']['p50_ms']:.2f} ms vs the raw {raw_same['backend']} encoder's "
            f"{raw_same['sets']['short']['p50_ms']:.2f} ms: +{gap:.2f} ms (target <= +{LATENCY_GAP_MS:g} ms)",
        ),
    ]
    if mlflow:
        theirs = mlflow["cells"]["short/32"]["req_s"]
        lines.append(verdict(served >= OVER_MLFLOW * theirs, f"{served / theirs:.1f}x `mlflow models serve`'s "
                             f"{theirs:.0f} req/s at 32 clients (target >= {OVER_MLFLOW:g}x)"))
    lines += [verdict(c32["p99_ms"] < TAIL * c32["p50_ms"], f"p99 {c32['p99_ms']:.1f} ms = "
                      f"{c32['p99_ms'] / c32['p50_ms']:.1f}x p50 at 32 clients (target < {TAIL:g}x)"),
              verdict(errors == 0, f"{errors} errors over every stsreg serve row (target 0)")]
    return lines


def format_report(results: dict) -> str:
    m = results["machine"]
    gpu = f"{m['gpu']} (torch on the GPU; the servers and the client on its host) and " if m.get("gpu") else ""
    lines = [
        "# Served benchmark",
        "",
        f"`make bench-serve` on {gpu}{m['cpu']} ({m['cores']} cores, {m['threads']} threads per server and for the "
        f"raw "
        f"encoder; CPU flags {', '.join(m.get('cpu_flags') or ['not recorded'])}; native bf16: "
        f"{m.get('native_bf16', 'not recorded')}), "
        f"{m['date']}; {results['seconds']:g} s of load per cell, one pair per request, "
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
        for cell, c in r["cells"].items():
            texts, clients = cell.split("/")
            lines.append(f"| {r['name']} | {computes} | {texts} | {clients} | {c['req_s']:.1f} | {_f(c['p50_ms'])} | "
                         f"{_f(c['p95_ms'])} | {_f(c['p99_ms'])} | {c['errors']} | {_f(c.get('client_cpu'), '.2f')} |")
    return "\n".join(lines + ["", "## Targets (32 clients, short pairs)", "", *_targets(results), ""])
