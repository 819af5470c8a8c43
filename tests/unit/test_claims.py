"""reports/claims.md: verdicts from per-seed paired p-values, targets, and the memory claim."""

import pandas as pd
import pytest

from stsreg.experiments import claims


@pytest.mark.parametrize("ps, expected", [([0.01, 0.02, 0.001], "supported"), ([0.01, 0.2, 0.001], "inconclusive"),
                                          ([0.99, 0.97, 1.0], "contradicted"), ([], "inconclusive")])
def test_verdict_needs_every_seed(ps, expected):
    assert claims.verdict(ps) == expected


def _results():
    rows = [("base", 77.1, 79.0, 78.8), ("contrast", 77.0, 78.6, 78.5), ("cosent", 80.4, 81.5, 80.0),
            ("cosine_mse", 79.8, 82.3, 80.8), ("ours", 77.5, 77.9, 77.5), ("translated_relu", 77.4, 77.3, 77.1),
            ("mse", 77.5, 78.0, 77.6), ("ours_cos", 79.9, 82.4, 80.9)]
    return pd.DataFrame([{"method": m, "seeds": 2, "sickr_mean": s, "avg7_mean": a, "avg7_unseen_mean": u}
                         for m, s, a, u in rows])


def _paired():
    def row(a, b, view, diff, p, seed):
        return {"reference": a, "other": b, "seed": seed, "view": view, "diff": diff, "low": diff - 0.3,
                "high": diff + 0.3, "p_value": p}
    rows = []
    for seed in (1, 2):
        rows += [row("ours_cos", "contrast", "avg7", 3.8, 0.0, seed), row("ours_cos", "contrast", "avg7_unseen", 2.4, 0.0, seed),
                 row("ours_cos", "cosent", "avg7", 0.9, 0.001, seed), row("ours_cos", "cosent", "avg7_unseen", 0.9, 0.2, seed),
                 row("ours_cos", "cosine_mse", "avg7", 0.1, 0.3, seed), row("ours_cos", "cosine_mse", "avg7_unseen", 0.1, 0.4, seed),
                 row("ours", "translated_relu", "avg7", 0.6, 0.01, seed), row("ours", "translated_relu", "avg7_unseen", 0.4, 0.03, seed),
                 row("ours", "mse", "avg7", -0.1, 0.98, seed), row("ours", "mse", "avg7_unseen", -0.1, 0.96, seed)]
    return pd.DataFrame(rows)


def test_claims_table_states_numbers_verdicts_targets_and_memory(tmp_path):
    (tmp_path / "compare").mkdir()
    _results().to_csv(tmp_path / "compare/results.csv", index=False)
    _paired().to_csv(tmp_path / "compare/paired.csv", index=False)
    (tmp_path / "profile.json").write_text('{"memory_ratio": 0.28, "device": "cpu", "headline_predicted": 1}')
    md = claims.write(tmp_path / "compare", tmp_path / "profile.json", tmp_path / "claims.md")
    assert md == (tmp_path / "claims.md").read_text().rstrip("\n")
    assert "**ours_cos**" in md and "2 seed(s)" in md
    lines = {ln.split("|")[2].strip() + "/" + ln.split("|")[3].strip(): ln for ln in md.splitlines()
             if ln.startswith("| (") or ln.startswith("| the bar")}
    assert "**supported**" in lines["ours_cos vs contrast/all pairs"] and "+3.80" in lines["ours_cos vs contrast/all pairs"]
    assert "**inconclusive**" in lines["ours_cos vs cosent/unseen pairs"]
    assert "**supported**" in lines["ours vs translated_relu/unseen pairs"]
    assert "**contradicted**" in lines["ours vs mse/all pairs"]
    assert "avg7 82.40 (target 83.6: short by 1.20)" in md and "avg7-unseen 80.90 (target 82.0: short by 1.10)" in md
    assert "SICK-R 79.90 vs base 77.10" in md
    assert "= **0.28**" in md and "predicted by the cost model" in md and "-> **supported**" in md


def test_claims_1_and_2_come_from_the_nli_table(tmp_path):
    (tmp_path / "compare").mkdir()
    _results().to_csv(tmp_path / "compare/results.csv", index=False)
    _paired().to_csv(tmp_path / "compare/paired.csv", index=False)
    (tmp_path / "nli").mkdir()
    rows = [{"reference": "smooth_k2", "other": o, "seed": 42, "view": v, "diff": d, "low": d - 0.2, "high": d + 0.2, "p_value": p}
            for o, d, p in (("softmax", 1.5, 0.001), ("mse", 0.4, 0.02), ("l1", 2.0, 0.001), ("translated_relu", -0.3, 0.99),
                            ("triplet", 0.1, 0.3), ("simcse_sup", -1.0, 1.0), ("simcse_unsup", 0.5, 0.01))
            for v in ("avg7", "avg7_unseen")]
    pd.DataFrame(rows).to_csv(tmp_path / "nli/paired.csv", index=False)
    md = claims.write(tmp_path / "compare", tmp_path / "nomemory.json", tmp_path / "claims.md", nli_dir=tmp_path / "nli")
    lines = {ln.split("|")[2].strip() + "/" + ln.split("|")[3].strip(): ln for ln in md.splitlines() if ln.startswith("| ")}
    assert lines["smooth_k2 vs softmax/all pairs"].startswith("| (1) NLI only") and "**supported**" in lines["smooth_k2 vs softmax/all pairs"]
    assert "**contradicted**" in lines["smooth_k2 vs translated_relu/unseen pairs"] and "(2) NLI only" in lines["smooth_k2 vs translated_relu/unseen pairs"]
    assert "**inconclusive**" in lines["smooth_k2 vs triplet/all pairs"]
    # the stage-2 claims still come from the comparison
    assert "**supported**" in lines["ours vs translated_relu/all pairs"]
    # without the NLI table the claims table has no NLI rows
    assert "NLI only" not in claims.write(tmp_path / "compare", tmp_path / "nomemory.json", tmp_path / "c2.md", nli_dir=tmp_path / "none")
