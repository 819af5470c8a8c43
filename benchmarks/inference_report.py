"""The inference benchmark's report (:mod:`benchmarks.inference`): one row per way to run the encoder, ratios against
torch fp32, the served latency, and the targets met or missed with their numbers."""

from __future__ import annotations

SETS = ("short", "long")
LONG_TOKENS = 128


def targets(result: dict) -> list[str]:
    """The issue's targets, each met or missed with the numbers (and why, where the numbers say it)."""
    rows, lines = result["rows"], []
    base = rows["torch fp32"]["short"]["sentences_per_s"]
    if "onnx int8" in rows:
        int8 = rows["onnx int8"]
        ratio = int8["short"]["sentences_per_s"] / base
        drop = (
            (rows["torch fp32"]["avg7"] - int8["avg7"])
            if int8["avg7"] is not None and rows["torch fp32"]["avg7"] is not None
            else None
        )
        flags = set(result["machine"].get("cpu_flags", []))
        why = ("" if ratio >= 3 else "; int8 dot products here: " + (
            "AVX512-VNNI/AMX present" if flags & {"avx512_vnni", "amx_tile"} else
            "neither AVX512-VNNI nor AMX on this CPU, so int8 matrix products run on AVX2"))
        lines.append(f"- ONNX int8 >= 3x torch fp32 on short texts: **{ratio:.2f}x** "
                     f"({'met' if ratio >= 3 else 'missed'}{why}); "
                     f"avg7 drop <= 0.3: **{drop:+.2f}** ({'met' if drop is not None and drop <= 0.3 else 'missed'})"
                     if drop is not None else f"- ONNX int8 vs torch fp32 on short texts: **{ratio:.2f}x**{why}")
        bf16 = rows.get("torch bf16", {}).get("short", {}).get("sentences_per_s")
        if bf16:
            native = (
                result["machine"].get("gpu_native_bf16")
                if result["machine"].get("gpu")
                else result["machine"]["native_bf16"]
            )
            lines.append(f"- ONNX int8 faster than torch bf16: {int8['short']['sentences_per_s'] / bf16:.2f}x "
                         f"({'met' if int8['short']['sentences_per_s'] > bf16 else 'missed'}; bf16 native here: "
                         f"{native})")
    if result.get("served"):
        s = result["served"]
        ratio = s["auto"]["p50_ms"] / s["torch fp32"]["p50_ms"]
        names = {"torch": "torch fp32", "onnx": "onnx fp32", "onnx-int8": "onnx int8"}
        auto_row = rows.get(names.get(s["auto"]["backend"], ""), {}).get("short", {})
        why = ("" if ratio <= 0.5 or not auto_row else
               f": the encoder's own batch-1 p50 is {rows['torch fp32']['short']['p50_ms']:.1f} ms (torch fp32) vs "
               f"{auto_row['p50_ms']:.1f} ms ({s['auto']['backend']}); the rest of a request, MLflow's scoring path "
               "(JSON, schema check, pandas) and the pair's cosine, is the same for every backend")
        lines.append(f"- served batch-1 p50 of `auto` ({s['auto']['backend']}) <= half of torch fp32: "
                     f"{s['auto']['p50_ms']:.1f} vs {s['torch fp32']['p50_ms']:.1f} ms = **{ratio:.2f}x** "
                     f"({'met' if ratio <= 0.5 else 'missed'}{why})")
    return lines


def format_report(result: dict, command: str) -> str:
    m, rows = result["machine"], result["rows"]
    on = (f"{m['gpu']} (torch rows; ONNX rows on the host CPU {m['cpu']})" if m.get("gpu") else m["cpu"])
    base = {w: rows["torch fp32"][w]["sentences_per_s"] for w in SETS}
    lines = [f"# Inference benchmark{' on a GPU' if m.get('gpu') else ''}", "",
             f"`{command}` on {on}, {m['cores']} cores, {result['threads']} threads for every row (torch and ONNX "
             f"Runtime), torch {m['torch']}, {m['date']}; CPU flags {', '.join(m.get('cpu_flags', [])) or 'n/a'}, "
             f"native bf16 on the CPU: {m['native_bf16']}. Model: {result['model']}. Short: {result['sets']['short']} "
             f"distinct STS-B test sentences; long: {result['sets']['long']} passages of >= {LONG_TOKENS} tokens (the "
             "same sentences joined). Throughput at batch 64 (median of "
             f"{result['repeats']} passes), latency of one sentence per call. avg7: as scored at registration.", "",
             "| row | avg7 | STS-B test | short: sentences/s | x torch fp32 | p50 ms | p95 ms | long: sentences/s | x "
             "torch fp32 | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        avg7 = f"{r['avg7']:.2f}" if r["avg7"] is not None else "-"
        cells = [f"{r[w]['sentences_per_s']:.0f} | {r[w]['sentences_per_s'] / base[w]:.2f}x | {r[w]['p50_ms']:.1f} | "
                 f"{r[w]['p95_ms']:.1f}" for w in SETS]
        lines.append(f"| {name} | {avg7} | {r['stsb_test_spearman']:.2f} | {cells[0]} | {cells[1]} |")
    lines += [f"| {name} | left out: {why} | | | | | | | | | |" for name, why in result.get("skipped", {}).items()]
    if result.get("served"):
        s = result["served"]
        lines += ["", "Served (`stsreg serve`'s app in-process, one pair per request, "
                  f"{result['served_n']} requests):", "", "| setting | backend | p50 ms | p95 ms |",
                  "|---|---|---|---|"]
        lines += [f"| {k} | {v['backend']} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} |" for k, v in s.items()]
    lines += ["", "## Targets", "", *targets(result), ""]
    return "\n".join(lines)
