"""Where a request's time goes in ``stsreg serve``, per load cell of ``make bench-serve``: its own ``GET /metrics``
(:mod:`stsreg.product.serving.prometheus`) read before and after the cell, the difference divided out.

Per request (means over the cell): the server's whole time (``stsreg_request_seconds``, from the request's first
byte to its answer's last), tokenizing, the wait in the queue, the encoder call of its batch, building and sending
the answer; per encoder call: distinct sentences and seconds. The client's p50 minus the server's time is what lies
outside the server's clock (the socket, HTTP parsing before the app, wrk itself).
"""

from __future__ import annotations

import urllib.request

#: Histogram -> the name its mean is reported under.
TIMED = {"stsreg_request_seconds": "request_ms", "stsreg_tokenise_seconds": "tokenise_ms",
         "stsreg_queue_wait_seconds": "queue_wait_ms", "stsreg_encode_seconds": "encode_call_ms",
         "stsreg_respond_seconds": "respond_ms"}


def snapshot(url: str) -> dict[str, float]:
    """``{metric_sum, metric_count}`` of the timed histograms and ``stsreg_batch_sentences`` at ``url``/metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith(("_sum", "_count")) and sample.name.rsplit("_", 1)[0] in (
                    *TIMED, "stsreg_batch_sentences"):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """Means over what happened between two snapshots: ms per request for each step, ms and sentences per encoder
    call."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    out = {}
    for metric, name in TIMED.items():
        n = d.get(metric + "_count", 0.0)
        out[name] = 1000 * d.get(metric + "_sum", 0.0) / n if n else None
    calls = d.get("stsreg_batch_sentences_count", 0.0)
    out["sentences_per_call"] = d.get("stsreg_batch_sentences_sum", 0.0) / calls if calls else None
    return out


def table(row: dict) -> list[str]:
    """Markdown rows of one server's cells that carry a breakdown."""
    f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    lines = []
    for cell, c in row["cells"].items():
        s = c.get("server")
        if s:
            texts, clients = cell.split("/")
            lines.append(f"| {texts} | {clients} | {c['p50_ms']:.2f} | {f(s['request_ms'])} | {f(s['tokenise_ms'])} | "
                         f"{f(s['queue_wait_ms'])} | {f(s['encode_call_ms'])} | {f(s['sentences_per_call'])} | "
                         f"{f(s['respond_ms'])} |")
    if not lines:
        return []
    return ["", f"## Where a request's time goes in `{row['name']}` (its `/metrics`, means per request)", "",
            "| texts | clients | client p50 ms | server ms | tokenise ms | queue wait ms | encoder call ms | "
            "sentences per call | respond ms |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|", *lines]
