"""Can STS-B dev choose a model between the two cosine maps? Interpolate the weights of the two fine-tunes.

``reports/explore/cos_scale`` found that the band ``a = 7.5, b = -2.5`` beats CoSENT on every test view while STS-B
dev prefers ``a = 5, b = 0``, so the dev-only rule cannot pick it. Both fine-tunes start from the same stage-1 model,
so their weights can be averaged (a "model soup", Wortsman et al., ICML 2022; weight-space ensembles stay accurate
when the models share a start). This script asks whether some mix ``(1 - alpha) * a5 + alpha * a7.5`` is better on
STS-B dev than either ingredient: if so, the dev-only rule picks it, and its test views (reporting only) say whether
it keeps the narrower band's lead over CoSENT.

Per seed: ``soup_train.py`` trains both ingredients as compare-like ``ours_cos`` rows (the comparison's stage-1 model of
the seed, 1 epoch, the best STS-B dev checkpoint after step 0) and keeps the models under ``checkpoints/``. Here:

1. STS-B dev Spearman at ``alpha`` = 0, 0.1, ..., 1 (alpha = 0 and 1 must equal the ingredients' training figures);
2. ``alpha*`` = the best dev (the earliest alpha on a tie: the nearer the default map, the better);
3. the 7-task evaluation of the mixes at 0.25, 0.5, 0.75 and ``alpha*`` (reporting only: it shows whether dev and
   test agree along the path), the ingredients' evaluations being the rows already committed; paired bootstraps of
   the ``alpha*`` mix against the comparison's ``ours_cos`` and ``cosent`` rows of the seed.

Writes ``reports/explore/soup/`` (``dev_curve.json``, ``<mix>-<seed>/`` evaluations, ``results.md``,
``alpha.png``). Commands:

    python -m stsreg.experiments.explore.soup_train --seeds 42 43 44
    python -m stsreg.experiments.explore.soup --seeds 42 43 44
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pandas as pd

from stsreg.experiments.explore.cos_scale import COLUMNS, REFERENCES, STS, predictions, run_dir
from stsreg.experiments.explore.soup_train import MODELS, model_dir

OUT = Path("reports/explore/soup")
MAPS = ((5.0, 0.0), (7.5, -2.5))  # alpha = 0 and alpha = 1
ALPHAS = [round(i / 10, 1) for i in range(11)]
TESTED = (0.25, 0.5, 0.75)  # mixes evaluated on the 7 tasks besides alpha*


def mix_name(alpha: float) -> str:
    return f"mix{alpha:g}"


def load(seed: int):
    """The two ingredients of ``seed``, ready to score STS-B dev as training scored it."""
    from stsreg.infra import runtime
    from stsreg.product.model import SiameseRegressor

    models = []
    for a, b in MAPS:
        m = SiameseRegressor.load(model_dir(a, b, seed))
        m.token_cache = runtime.cache_dir("tokens")
        models.append(m.to(runtime.resolve_device()).eval())
    return models


def mix(target, s0: dict, s1: dict, alpha: float) -> None:
    """``target``'s weights <- (1 - alpha) * s0 + alpha * s1 (integer buffers from s0)."""
    target.load_state_dict({k: s0[k] * (1 - alpha) + s1[k] * alpha if s0[k].is_floating_point() else s0[k]
                            for k in s0})


def dev_along(start, end, label: str = "") -> dict[float, float]:
    """STS-B dev Spearman x100 of cosine of ``(1 - alpha) * W(start) + alpha * W(end)`` at each alpha of
    :data:`ALPHAS` (``start``'s weights are overwritten). No test row is read."""
    from stsreg.product.data.catalogue import dev_split
    from stsreg.product.sts_eval import spearman_cosine

    dev = dev_split(pd.read_parquet(STS, filters=[("split", "==", "dev")]))
    s0 = {k: v.clone() for k, v in start.state_dict().items()}
    s1 = {k: v.clone() for k, v in end.state_dict().items()}
    curve = {}
    for alpha in ALPHAS:
        mix(start, s0, s1, alpha)
        curve[alpha] = spearman_cosine(start, dev.sentence1, dev.sentence2, dev.score, 64, show_progress=False)
        print(f"{label}alpha {alpha:g}: dev {curve[alpha]:.3f}", flush=True)
    return curve


def dev_curve(seed: int) -> dict[float, float]:
    """:func:`dev_along` the two ingredients of ``seed``; alpha 0 / 1 checked against the ingredients' training runs."""
    curve = dev_along(*load(seed), label=f"seed {seed} ")
    for alpha, (a, b) in zip((0.0, 1.0), MAPS):
        trained = json.loads((model_dir(a, b, seed) / "training_summary.json").read_text())["trained_best_dev_spearman"]
        if abs(curve[alpha] - trained) > 1e-6:
            raise SystemExit(f"seed {seed}: dev at alpha {alpha:g} is {curve[alpha]:.4f}, its training run said "
                             f"{trained:.4f}: the mix does not reproduce its ingredient")
    return curve


def best_alpha(curve: dict[float, float]) -> float:
    return max(curve, key=lambda alpha: (round(curve[alpha], 6), -alpha))


def evaluate_mix(params, seed: int, alpha: float) -> Path:
    """The 7-task evaluation of the mix ``alpha`` of ``seed`` -> ``OUT/mix<alpha>-<seed>/``."""
    from stsreg.product.runners.eval_runner import run_evaluate

    out = OUT / f"{mix_name(alpha)}-{seed}"
    if (out / "metrics.json").exists():
        return out
    m0, m1 = load(seed)
    mix(m0, m0.state_dict(), {k: v.clone() for k, v in m1.state_dict().items()}, alpha)
    work = MODELS / "_mix"
    shutil.rmtree(work, ignore_errors=True)
    m0.save(work)
    run_evaluate(params, work, STS, out)
    shutil.rmtree(work)
    return out


def figures(run: Path) -> dict:
    """The report's columns of an evaluated model; its STS-B dev is the evaluation's (the same figure as the dev
    curve's: every STS-B dev sentence fits both lengths)."""
    m = json.loads((run / "metrics.json").read_text())
    return {c: m[k or "stsb_dev_spearman"] for c, k in COLUMNS.items()}


def ingredient_run(alpha: float, seed: int) -> Path | None:
    """Where the committed evaluation of an ingredient lives (alpha 0: the comparison's ours_cos row; 1: cos_scale)."""
    return {0.0: run_dir("ours_cos", seed), 1.0: run_dir("a7.5_b-2.5", seed)}.get(alpha)


def plot(curves: dict[int, dict[float, float]], tests: dict[int, dict[float, dict]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for seed, curve in curves.items():
        axes[0].plot(list(curve), list(curve.values()), marker="o", label=f"seed {seed}")
        for ax, key in zip(axes[1:], ("avg7", "avg7 unseen")):
            xs = sorted(tests[seed])
            ax.plot(xs, [tests[seed][x][key] for x in xs], marker="o", label=f"seed {seed}")
    for ax, title in zip(axes, ("STS-B dev (selection)", "avg7 (reporting only)", "avg7 unseen (reporting only)")):
        ax.set_title(title)
        ax.set_xlabel("alpha: 0 = a5,b0 ... 1 = a7.5,b-2.5")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Spearman x100")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(OUT / "alpha.png", dpi=110)


def main(argv=None) -> int:
    from stsreg.infra.config import load_params
    from stsreg.product.sts_eval import paired_on_predictions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    args = ap.parse_args(argv)
    params = load_params("params.yaml")
    cache = OUT / "dev_curve.json"
    stored = json.loads(cache.read_text()) if cache.exists() else {}
    curves = {}
    for seed in args.seeds:
        if str(seed) not in stored:
            stored[str(seed)] = {f"{k:g}": v for k, v in dev_curve(seed).items()}
            cache.write_text(json.dumps(stored, indent=2, sort_keys=True))
        curves[seed] = {float(k): v for k, v in stored[str(seed)].items()}
    chosen = {seed: best_alpha(c) for seed, c in curves.items()}
    tests = {}
    for seed in args.seeds:
        runs = {alpha: ingredient_run(alpha, seed) for alpha in (0.0, 1.0)}
        for alpha in sorted({*TESTED, chosen[seed]} - {0.0, 1.0}):
            runs[alpha] = evaluate_mix(params, seed, alpha)
        tests[seed] = {alpha: figures(run) for alpha, run in runs.items()}
    plot(curves, tests)
    cols = list(COLUMNS)
    dev_rows = [f"| {seed} | " + " | ".join(f"{curves[seed][a]:.2f}" for a in ALPHAS) + f" | {chosen[seed]:g} |"
                for seed in args.seeds]
    test_rows = [f"| {seed} | {alpha:g}{' (alpha*)' if alpha == chosen[seed] else ''} | "
                 + " | ".join(f"{f[c]:.2f}" for c in cols) + " |"
                 for seed in args.seeds for alpha, f in sorted(tests[seed].items())]
    pairs = []
    for seed in args.seeds:
        run = ingredient_run(chosen[seed], seed) or OUT / f"{mix_name(chosen[seed])}-{seed}"
        for ref in REFERENCES:
            if run == run_dir(ref, seed):
                continue
            for unseen in (False, True):
                r = paired_on_predictions(predictions(run), predictions(run_dir(ref, seed)), unseen_only=unseen,
                                          n_resamples=params.evaluate.n_resamples)
                pairs.append(f"| {seed} | {chosen[seed]:g} | {ref} | {'avg7_unseen' if unseen else 'avg7'} | "
                             f"{r.diff:+.2f} | [{r.low:+.2f}, {r.high:+.2f}] | {r.p_value:.3f} |")
    mean = {c: pd.Series([tests[s][chosen[s]][c] for s in args.seeds]).mean() for c in cols}
    text = "\n".join([
        "Weights `(1 - alpha) * W(a = 5, b = 0) + alpha * W(a = 7.5, b = -2.5)` of two compare-like `ours_cos` "
        "fine-tunes from the same stage-1 model (1 epoch, the best STS-B dev checkpoint after step 0). STS-B dev "
        "Spearman x100 of cosine is the only figure `alpha*` reads; the test columns and paired bootstraps (one-sided "
        "p that the mix is better) are reporting only.", "",
        "## STS-B dev along the path (selection)", "",
        "| seed | " + " | ".join(f"{a:g}" for a in ALPHAS) + " | alpha* |",
        "|---:|" + "---:|" * (len(ALPHAS) + 1), *dev_rows, "",
        "## The 7 tasks along the path (reporting only)", "",
        "| seed | alpha | " + " | ".join(cols) + " |", "|---:|---|" + "---:|" * len(cols), *test_rows, "",
        "Mean over seeds at alpha*: " + ", ".join(f"{c} {v:.2f}" for c, v in mean.items()) + ".", "",
        "## alpha* against the comparison's rows of the same seed", "",
        "| seed | alpha* | against | view | diff | 95% CI | p |", "|---:|---:|---|---|---:|---|---:|", *pairs, ""])
    (OUT / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
