"""The paper's claims, each with our number, its interval and a verdict per backbone: ``reports/claims.md``
(``stsreg claims``).

Reads what the comparisons and the profile measured (no model is run here), one column per backbone:

- per comparison folder (``reports/compare/`` on the default backbone, ``reports/compare_backbones/<name>/`` on the
  others), ``results.csv`` — per method, mean ± std over seeds of avg7 / avg7-unseen (Spearman x100) — and
  ``paired.csv`` — paired bootstraps a - b per seed and view (one-sided p that a is better);
- ``metrics/profile.json`` — ``memory_ratio`` (regression at the headline point / contrastive at the reference point);
- ``reports/nli_table/paired.csv`` — the NLI-only table's paired tests of Smooth K2 against every other objective
  (claims 1 and 2: on NLI alone the buffered loss beats classification, MSE and L1, and Smooth K2 beats Translated
  ReLU),
  run on the default backbone only.

Verdict of "a beats b" in one view: **supported** when every seed gives p < alpha, **contradicted** when every seed
gives p > 1 - alpha (b is better), **inconclusive** otherwise; "not run" where that backbone lacks a row.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import yaml

from stsreg.infra.errors import InputError
from stsreg.infra import atomic

#: Targets for the best regression row on the default backbone (mean of the seeds), from the project's quality goal.
TARGET_AVG7, TARGET_UNSEEN = 83.6, 82.0
VIEWS = (("avg7", "all pairs"), ("avg7_unseen", "unseen pairs"))
BEST = "best"  # in a claim's pair: the backbone's regression row with the best mean STS-B dev (paired.csv's reference)
NOT_RUN = "not run"


def _no_pairs() -> pd.DataFrame:
    """A paired table with no rows: a comparison without a regression row, or a claim a backbone did not run."""
    return pd.DataFrame(columns=["reference", "other", "view"])

#: (claim, pairs (a, b), read from the NLI-only table). The NLI table runs on the default backbone only.
CLAIMS = (("(1) NLI only: the buffered loss beats classification, MSE and L1",
           (("smooth_k2", "softmax"), ("smooth_k2", "mse"), ("smooth_k2", "l1")), True),
          ("(2) NLI only: Smooth K2 >= Translated ReLU", (("smooth_k2", "translated_relu"),), True),
          ("NLI only, context: Smooth K2 against triplet and SimCSE",
           (("smooth_k2", "triplet"), ("smooth_k2", "simcse_sup"), ("smooth_k2", "simcse_unsup")), True),
          ("(a) regression fine-tuning beats contrastive fine-tuning of a pretrained embedder", ((BEST, "contrast"),),
           False),
          ("(b) Smooth K2 >= Translated ReLU (buffer shape, on the head)", (("ours", "translated_relu"),), False),
          ("(c) the buffered loss beats MSE (on the head)", (("ours", "mse"),), False),
          ("the bar: the best regression row beats the strongest sentence-transformers-style loss",
           ((BEST, "cosine_mse"), (BEST, "cosent")), False),
          ("the gain: the best regression row beats the untouched backbone", ((BEST, "base"),), False))


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One backbone's comparison: ``results`` (results.csv: one row per method with ``seeds`` and ``<metric>_mean``)
    and ``paired`` (paired.csv: reference, other, seed, view, diff, low, high, p_value)."""

    backbone: str
    results: pd.DataFrame
    paired: pd.DataFrame

    @property
    def seeds(self) -> int:
        return int(self.results.seeds.max()) if not self.results.empty else 0

    @property
    def best(self) -> str | None:
        """The regression row the comparison chose on STS-B dev (no test figure takes part)."""
        return None if self.paired.empty else str(self.paired.reference.iloc[0])


def load(folder: Path, backbone: str | None = None) -> Comparison:
    """A comparison folder; ``backbone`` defaults to ``model.backbone`` of the folder's ``params.yaml``.

    Raises :class:`~stsreg.infra.errors.InputError` naming the file when the folder holds no finished comparison."""

    for name in ("results.csv",) + (("params.yaml",) if backbone is None else ()):
        if not (folder / name).is_file():
            raise InputError(f"{folder / name}: missing; {folder} is not a finished comparison (`stsreg compare "
                             "--backbone NAME` writes one)")
    if backbone is None:
        backbone = yaml.safe_load((folder / "params.yaml").read_text())["model"]["backbone"]
    paired_path = folder / "paired.csv"
    paired = pd.read_csv(paired_path) if paired_path.exists() else _no_pairs()
    return Comparison(backbone, pd.read_csv(folder / "results.csv"), paired)


def verdict(p_values, alpha: float = 0.05) -> str:
    """Per-seed one-sided p-values of "a beats b" -> supported | contradicted | inconclusive."""
    ps = list(p_values)
    if ps and all(p < alpha for p in ps):
        return "supported"
    if ps and all(p > 1 - alpha for p in ps):
        return "contradicted"
    return "inconclusive"


def cell(paired: pd.DataFrame, a: str | None, b: str, view: str, alpha: float) -> str:
    """``+1.27 [+0.99, +1.46], [+0.93, +1.41]; p 0.001, 0.001: **supported**`` (mean diff, per-seed CI and p)."""
    g = paired[(paired.reference == a) & (paired.other == b) & (paired.view == view)] if a else paired.iloc[:0]
    if g.empty:
        return NOT_RUN
    cis = ", ".join(f"[{lo:+.2f}, {hi:+.2f}]" for lo, hi in zip(g.low, g.high))
    ps = ", ".join(f"{p:.3f}" for p in g.p_value)
    return f"{g['diff'].mean():+.2f} {cis}; p {ps}: **{verdict(g.p_value, alpha)}**"


def _claim_rows(comparisons: list[Comparison], nli_paired: pd.DataFrame | None, alpha: float) -> list[str]:
    """One row per (claim, pair, view) that some backbone ran; cells side by side, in ``comparisons``' order."""
    bests = {c.best for c in comparisons if c.best}
    best_name = next(iter(bests)) if len(bests) == 1 else "best regression row"
    rows = []
    for text, pairs, from_nli in CLAIMS:
        if from_nli and (nli_paired is None or nli_paired.empty):
            continue
        for a, b in pairs:
            name = best_name if a == BEST else a
            for view, label in VIEWS:
                # the NLI-only claims read the NLI table, which ran on the default backbone (the first column)
                sources = [(nli_paired if i == 0 else _no_pairs()) if from_nli else c.paired
                           for i, c in enumerate(comparisons)]
                cells = [cell(src, c.best if a == BEST else a, b, view, alpha) for src, c in zip(sources, comparisons)]
                if any(x != NOT_RUN for x in cells):
                    rows.append(f"| {text} | {name} vs {b} | {label} | " + " | ".join(cells) + " |")
    return rows


def _summary(comparisons: list[Comparison]) -> list[str]:
    """Per backbone, the best row's avg7 / unseen against the untouched backbone's; the targets on the default one."""
    lines = []
    for i, c in enumerate(comparisons):
        by = c.results.set_index("method")
        if c.best is None or c.best not in by.index:
            continue
        r = by.loc[c.best]
        base = (f" (untouched backbone {by.loc['base', 'avg7_mean']:.2f} / {by.loc['base', 'avg7_unseen_mean']:.2f}"
                f"; SICK-R {r.sickr_mean:.2f} vs {by.loc['base', 'sickr_mean']:.2f})") if "base" in by.index else ""
        line = (f"{c.backbone}: {c.best} avg7 {r.avg7_mean:.2f} / unseen {r.avg7_unseen_mean:.2f}{base}, "
                f"mean of {int(r.seeds)} seed(s)")
        if i == 0:
            met = [f"avg7 target {TARGET_AVG7}: " + ("met" if r.avg7_mean >= TARGET_AVG7
                                                     else f"short by {TARGET_AVG7 - r.avg7_mean:.2f}"),
                   f"unseen target {TARGET_UNSEEN}: " + ("met" if r.avg7_unseen_mean >= TARGET_UNSEEN
                                                        else f"short by {TARGET_UNSEEN - r.avg7_unseen_mean:.2f}")]
            line += "; " + ", ".join(met)
        lines += [f"- {line}."]
    return lines + [""] if lines else []


def build(comparisons: list[Comparison], profile: dict | None, alpha: float = 0.05,
          nli_paired: pd.DataFrame | None = None) -> str:
    """Markdown of the claims table (see the module docstring); ``comparisons[0]`` is the default backbone's."""
    names = ", ".join(f"{c.backbone} **{c.best}**" for c in comparisons if c.best)
    lines = [
        "# The paper's claims, measured here",
        "",
        "Generated by `stsreg claims` from each backbone's comparison ("
        + ", ".join(f"{c.backbone}: {c.seeds} seed(s)" for c in comparisons)
        + "), `metrics/profile.json` and, for "
        f"claims (1) and (2), `reports/nli_table/` ({comparisons[0].backbone}). Each cell: the difference a - b in "
        "Spearman x100 (mean over seeds), the 95% CI and p per seed (paired bootstrap on the same test pairs), "
        "and "
        f"the verdict: every seed p < {alpha} supports, every seed p > {1 - alpha:.2f} contradicts, else "
        'inconclusive; "not run" where a backbone lacks the row.',
        "",
    ]
    if names:
        lines += [
            "Best regression row per backbone (highest mean STS-B dev; no test figure takes part in the choice): "
            f"{names}.",
            "",
        ]
    lines += ["| claim | comparison | view | " + " | ".join(c.backbone for c in comparisons) + " |",
              "|---|---|---|" + "---|" * len(comparisons)]
    lines += _claim_rows(comparisons, nli_paired, alpha) + [""] + _summary(comparisons)
    if profile and "memory_ratio" in profile:
        ratio = profile["memory_ratio"]
        predicted = (
            " (one or both points predicted by the cost model, not run)"
            if profile.get("headline_predicted") or profile.get("reference_predicted")
            else ""
        )
        lines += [f"(d) memory ({comparisons[0].backbone}): regression fine-tuning needs less memory than contrastive "
                  "training at the paper's points: peak(regression, headline) / peak(contrastive, reference) = "
                  f"**{ratio:.2f}** on {profile.get('device', '?')}{predicted} -> "
                  f"**{'supported' if ratio < 1 else 'contradicted'}**.", ""]
    return "\n".join(lines)


def write(comparisons: list[Comparison], profile_metrics: Path, out: Path, alpha: float = 0.05,
          nli_dir: Path | None = None) -> str:
    """Read the profile and (when it ran) NLI-table outputs, write ``out`` (markdown) for ``comparisons``, return it."""
    profile = json.loads(profile_metrics.read_text()) if profile_metrics.exists() else None
    nli_path = nli_dir / "paired.csv" if nli_dir is not None else None
    nli_paired = pd.read_csv(nli_path) if nli_path is not None and nli_path.exists() else None
    md = build(comparisons, profile, alpha, nli_paired).rstrip("\n")
    atomic.write_text(out, md + "\n")
    return md
