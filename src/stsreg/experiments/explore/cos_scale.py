"""Does the fixed map 5*cos hold the cosine-buffered loss back? Train Smooth K2 on |a*cos + b - label| with other maps.

Hypothesis (from ``reports/explore/subset_breakdown.md``): CoSENT leaves the cosine's scale free and ends with every
test cosine in ~0.84-0.95, while a = 5, b = 0 pulls unrelated pairs to cosine 0. A map with b < 0 asks only for a
narrower, higher cosine range (a = 7.5, b = -2.5: labels 0-5 -> cosine 0.33-1.0; a = 10, b = -5: 0.5-1.0;
a = 20, b = -15: 0.75-1.0). A control keeps the slope of a = 7.5 and moves the band down (a = 7.5, b = 0: labels
0-5 -> cosine 0-0.67), so that the step size and x0 / a are those of a = 7.5, b = -2.5 and only the band differs.

Each variant is one ``compare`` row with ``stage2.cos_a`` / ``cos_b`` changed and nothing else: the same start
(the comparison's stage-1 model of the seed), 1 epoch, the best STS-B dev checkpoint after step 0. Writes
``reports/explore/cos_scale/<name>-<seed>/`` (metrics.json, predictions.parquet, table.md, training_summary.json) and
``results.md``: dev (the only figure a choice may read) beside the test views and paired bootstraps against the
comparison's ``ours_cos`` and ``cosent`` rows of the same seed (reporting only).

    python -m stsreg.experiments.explore.cos_scale --seeds 42 43 44 --maps 10,-5 7.5,-2.5
    python -m stsreg.experiments.explore.cos_scale --seeds 42 --maps 20,-15 7.5,0
    python -m stsreg.experiments.explore.cos_scale --report-only --seeds 42 43 44 --maps 10,-5 7.5,-2.5 20,-15 7.5,0
    python -m stsreg.experiments.explore.cos_scale --production 7.5,-2.5

A finished (map, seed) is skipped on a rerun, so adding seeds trains only the new runs.

``--production A,B`` instead trains the production stage 2 (``params.stage2`` as it stands: 3 epochs, ``keep``,
``params.seed``) from ``models/stage1`` with that map, and writes ``production-<name>/`` and ``production.md``: its
STS-B dev against ``models/stage2``'s (the figure a default change would have to win), and, for reporting only, the
test views against ``reports/eval`` (the production model's evaluation).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import shutil
from pathlib import Path

import pandas as pd

from stsreg.infra import public_tables

OUT = Path("reports/explore/cos_scale")
RUNS = Path("reports/compare/runs")
STS = Path("data/prepared/sts.parquet")
#: The comparison's rows every map is paired against (their runs live in ``RUNS``).
REFERENCES = ("ours_cos", "cosent")


def stage1_of(seed: int) -> Path:
    """The comparison's stage-1 model of ``seed`` (``_stage1-<seed>-<key>``); refuses to guess among several."""
    found = sorted(d for d in RUNS.glob(f"_stage1-{seed}-*") if not d.name.endswith("-checkpoints"))
    if len(found) != 1:
        raise SystemExit(f"expected one stage-1 model for seed {seed} under {RUNS}, found {[d.name for d in found]}")
    return found[0]


def name_of(a: float, b: float) -> str:
    return f"a{a:g}_b{b:g}"


def run_dir(name: str, seed: int) -> Path:
    """Where the run of ``name`` (a reference row or a map's ``name_of``) and ``seed`` keeps its outputs."""
    return (RUNS if name in REFERENCES else OUT) / f"{name}-{seed}"


@functools.cache
def predictions(run: Path) -> pd.DataFrame:
    """A run's ``predictions.parquet``, read once however many paired tests use it."""
    return pd.read_parquet(run / "predictions.parquet")


def row_params(params, seed: int, **stage2):
    """The settings of the comparison's ``ours_cos`` row of ``seed`` (its 1-epoch budget), ``stage2`` fields replaced
    (e.g. ``cos_a=7.5, cos_b=-2.5``)."""
    from stsreg.experiments.compare import stage2_for

    p = dataclasses.replace(params, seed=seed)
    return dataclasses.replace(p, stage2=dataclasses.replace(stage2_for(p, "ours_cos"), **stage2))


def train_and_evaluate(params, seed: int, a: float, b: float) -> Path:
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.runners.eval_runner import run_evaluate
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start

    out = run_dir(name_of(a, b), seed)
    if (out / "metrics.json").exists():
        return out
    p = row_params(params, seed, cos_a=a, cos_b=b)
    work = OUT / "_work"
    shutil.rmtree(work, ignore_errors=True)
    run_stage2(Start(SiameseRegressor.load(stage1_of(seed)), p), STS, work / "model", work / "ckpt", keep="trained")
    run_evaluate(p, work / "model", STS, out)
    shutil.copyfile(work / "model" / "training_summary.json", out / "training_summary.json")
    shutil.rmtree(work)
    return out


COLUMNS = {"dev kept": None, public_tables.display("sts12"): "sts12_spearman", "avg7": "avg7_spearman",
           "avg7 unseen": "avg7_unseen_spearman", public_tables.display("sickr"): "sickr_spearman"}


def figures(run: Path) -> dict:
    m = json.loads((run / "metrics.json").read_text())
    s = json.loads((run / "training_summary.json").read_text())
    return {c: (s["trained_best_dev_spearman"] if k is None else m[k]) for c, k in COLUMNS.items()}


def summarise(params, names: list[str], seeds: list[int]) -> str:
    """Mean and per-seed tables and paired tests; a (map, seed) not trained is left out, and the mean table says
    over how many seeds each row is."""
    from stsreg.product.sts_eval import paired_on_predictions

    rows = {name: {s: figures(run_dir(name, s)) for s in seeds if (run_dir(name, s) / "metrics.json").exists()}
            for name in [*REFERENCES, *names]}
    table = [f"| {name} | {len(runs)} | " + " | ".join(f"{pd.Series([f[c] for f in runs.values()]).mean():.2f}"
                                                         for c in COLUMNS) + " |"
             for name, runs in rows.items() if runs]
    per_seed = [f"| {name} | {s} | " + " | ".join(f"{f[c]:.2f}" for c in COLUMNS) + " |"
                for name, runs in rows.items() for s, f in runs.items()]
    tests = []
    for name in names:
        for ref in REFERENCES:
            for unseen in (False, True):
                for s in rows[name]:
                    r = paired_on_predictions(predictions(run_dir(name, s)), predictions(run_dir(ref, s)),
                                              unseen_only=unseen, n_resamples=params.evaluate.n_resamples)
                    tests.append(f"| {name} | {ref} | {s} | {'avg7_unseen' if unseen else 'avg7'} | {r.diff:+.2f} | "
                                 f"[{r.low:+.2f}, {r.high:+.2f}] | {r.p_value:.3f} |")
    head = " | ".join(COLUMNS)
    rule = "|".join(["---:"] * len(COLUMNS))
    return "\n".join([
        f"Smooth K2 on |a*cos + b - label| (x0 {params.stage2.x0:g}, k {params.stage2.k:g} on the label scale, so "
        f"x0 / a in cosine units), {params.compare.epochs or params.stage2.epochs} epoch(s), from the comparison's "
        f"stage-1 model of each seed, best STS-B dev after step 0; `ours_cos` (a = 5, b = 0) and `cosent` are the "
        f"comparison's rows. Spearman x100 of cosine, mean over the seeds each row ran. Dev is the selection figure; "
        "the test columns and the paired bootstraps (one-sided p that the row is better) are reporting only.", "",
        f"| row | seeds | {head} |", f"|---|---:|{rule}|", *table, "",
        f"| row | seed | {head} |", f"|---|---:|{rule}|", *per_seed, "",
        "| row | against | seed | view | diff | 95% CI | p |", "|---|---|---:|---|---:|---|---:|", *tests, ""])


def production(params, a: float, b: float) -> str:
    """Production stage 2 with the map (a, b) against the committed ``models/stage2``; returns the report's text."""
    from stsreg.product.sts_eval import paired_on_predictions
    from stsreg.product.runners.eval_runner import run_evaluate
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start

    committed = json.loads(Path("models/stage2/training_summary.json").read_text())["config"]
    if (committed["seed"] != params.seed
            or dict(committed["stage2"], cos_a=a, cos_b=b) != dict(dataclasses.asdict(params.stage2), cos_a=a,
                                                                   cos_b=b)):
        raise SystemExit("models/stage2 was trained with other stage-2 settings than params.yaml's: rerun "
                         "`dvc repro promote` first, so that the map is the only difference")
    out = OUT / f"production-{name_of(a, b)}"
    if not (out / "metrics.json").exists():
        p = dataclasses.replace(params, stage2=dataclasses.replace(params.stage2, cos_a=a, cos_b=b))
        work = OUT / "_work_production"
        # the checkpoint folder is kept until the run finishes, so a killed run resumes
        run_stage2(Start(Path("models/stage1"), p), STS, work / "model", work / "ckpt")
        run_evaluate(p, work / "model", STS, out)
        shutil.copyfile(work / "model" / "training_summary.json", out / "training_summary.json")
        shutil.rmtree(work)
    rows = []
    for label, run, metrics in [("models/stage2 (a = 5, b = 0)", Path("models/stage2"),
                                 Path("reports/eval/metrics.json")),
                                (f"a = {a:g}, b = {b:g}", out, out / "metrics.json")]:
        s = json.loads((run / "training_summary.json").read_text())
        m = json.loads(metrics.read_text())
        rows.append(f"| {label} | {s['start_dev_spearman']:.2f} -> {s['best_dev_spearman']:.2f} @ {s['best_step']}"
                    f"/{s['total_steps']} | " + " | ".join(f"{m[k]:.2f}" for k in list(COLUMNS.values())[1:]) + " |")
    tests = []
    for unseen in (False, True):
        r = paired_on_predictions(predictions(out), predictions(Path("reports/eval")), unseen_only=unseen,
                                  n_resamples=params.evaluate.n_resamples)
        tests.append(f"| {'avg7_unseen' if unseen else 'avg7'} | {r.diff:+.2f} | [{r.low:+.2f}, {r.high:+.2f}] | "
                     f"{r.p_value:.3f} |")
    st = params.stage2
    return "\n".join([
        f"Production stage 2 ({st.loss}, {st.epochs} epochs, lr {st.lr:g}, keep = {st.keep}, seed {params.seed}, "
        f"from models/stage1) with the map a*cos + b, against the committed models/stage2. Dev is the figure a "
        "default change would have to win; the test columns and the paired bootstrap (the map minus models/stage2, "
        "one-sided p that the map is better) are reporting only.", "",
        "| stage 2 | STS-B dev (start -> kept @ step) | " + " | ".join(list(COLUMNS)[1:]) + " |",
        "|---|---|" + "|".join(["---:"] * (len(COLUMNS) - 1)) + "|", *rows, "",
        "| view | diff | 95% CI | p |", "|---|---:|---|---:|", *tests, ""])


def main(argv=None) -> int:
    from stsreg.infra.config import load_params

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    ap.add_argument("--maps", nargs="+", default=["10,-5", "7.5,-2.5"], help="a,b pairs")
    ap.add_argument("--production", metavar="A,B", help="train the production stage 2 with this map instead")
    ap.add_argument(
        "--report-only", action="store_true", help="train nothing: write results.md from the runs there are"
    )
    a = ap.parse_args(argv)
    params = load_params("params.yaml")
    if a.production:
        text = production(params, *map(float, a.production.split(",")))
        (OUT / "production.md").write_text(text)
        print(text)
        return 0
    maps = [tuple(map(float, m.split(","))) for m in a.maps]
    for cos_a, cos_b in maps if not a.report_only else []:
        for seed in a.seeds:
            train_and_evaluate(params, seed, cos_a, cos_b)
    text = summarise(params, [name_of(*m) for m in maps], a.seeds)
    (OUT / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
