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
        rows += [row("ours_cos", "contrast", "avg7", 3.8, 0.0, seed),
                 row("ours_cos", "contrast", "avg7_unseen", 2.4, 0.0, seed),
                 row("ours_cos", "cosent", "avg7", 0.9, 0.001, seed),
                 row("ours_cos", "cosent", "avg7_unseen", 0.9, 0.2, seed),
                 row("ours_cos", "cosine_mse", "avg7", 0.1, 0.3, seed),
                 row("ours_cos", "cosine_mse", "avg7_unseen", 0.1, 0.4, seed),
                 row("ours", "translated_relu", "avg7", 0.6, 0.01, seed),
                 row("ours", "translated_relu", "avg7_unseen", 0.4, 0.03, seed),
                 row("ours", "mse", "avg7", -0.1, 0.98, seed), row("ours", "mse", "avg7_unseen", -0.1, 0.96, seed)]
    return pd.DataFrame(rows)


def _write(folder, results, paired, backbone=None):
    folder.mkdir(parents=True)
    results.to_csv(folder / "results.csv", index=False)
    paired.to_csv(folder / "paired.csv", index=False)
    if backbone:
        (folder / "params.yaml").write_text(f"model:\n  backbone: {backbone}\n")
    return folder


def _lines(md, column=4):
    """{"a vs b/view": cell of the column} for every claim row."""
    return {ln.split("|")[2].strip() + "/" + ln.split("|")[3].strip(): ln.split("|")[column].strip()
            for ln in md.splitlines() if ln.startswith("| (") or ln.startswith("| the ")}


def test_claims_table_states_numbers_verdicts_targets_and_memory(tmp_path):
    _write(tmp_path / "compare", _results(), _paired())
    (tmp_path / "profile.json").write_text('{"memory_ratio": 0.28, "device": "cpu", "headline_predicted": 1}')
    md = claims.write([claims.load(tmp_path / "compare", "MiniLM")], tmp_path / "profile.json", tmp_path / "claims.md")
    assert md == (tmp_path / "claims.md").read_text().rstrip("\n")
    assert "MiniLM **ours_cos**" in md and "MiniLM: 2 seed(s)" in md
    lines = _lines(md)
    assert lines["ours_cos vs contrast/all pairs"].startswith("+3.80 [+3.50, +4.10], [+3.50, +4.10]; p 0.000, 0.000")
    assert lines["ours_cos vs contrast/all pairs"].endswith("**supported**")
    assert lines["ours_cos vs cosent/unseen pairs"].endswith("**inconclusive**")
    assert lines["ours vs translated_relu/unseen pairs"].endswith("**supported**")
    assert lines["ours vs mse/all pairs"].endswith("**contradicted**")
    assert "ours_cos vs base/all pairs" not in lines  # no such pair measured: no row
    assert "avg7 82.40 / unseen 80.90 (untouched backbone 79.00 / 78.80; SICK-R 79.90 vs 77.10)" in md
    assert "avg7 target 83.6: short by 1.20, unseen target 82.0: short by 1.10" in md
    assert "= **0.28**" in md and "predicted by the cost model" in md and "-> **supported**" in md


def test_a_second_backbone_gets_its_own_column_and_not_run_where_it_lacks_a_row(tmp_path):
    main = claims.load(_write(tmp_path / "compare", _results(), _paired()), "MiniLM")
    keep = ["base", "cosent", "ours_cos"]
    other = _paired()
    other = other[other.other.isin(keep) & (other.reference == "ours_cos")].assign(diff=lambda d: d["diff"] + 1.0)
    results = _results()[lambda d: d.method.isin(keep)]
    second = claims.load(_write(tmp_path / "mpnet", results, other, backbone="all-mpnet-base-v2"))
    assert second.backbone == "all-mpnet-base-v2" and second.best == "ours_cos"
    md = claims.write([main, second], tmp_path / "none.json", tmp_path / "claims.md")
    assert "| claim | comparison | view | MiniLM | all-mpnet-base-v2 |" in md
    first, col2 = _lines(md, 4), _lines(md, 5)
    assert col2["ours_cos vs cosent/all pairs"].startswith("+1.90") and first[
        "ours_cos vs cosent/all pairs"
    ].startswith("+0.90")
    assert col2["ours_cos vs contrast/all pairs"] == "not run" and col2["ours vs mse/unseen pairs"] == "not run"
    assert "all-mpnet-base-v2: ours_cos avg7 82.40" in md
    assert md.count("target 83.6") == 1  # the targets are the default backbone's
    # different best rows per backbone: the comparison names the rule, each cell its backbone's row
    renamed = other.assign(reference="ours")
    third = claims.Comparison("x", results, renamed)
    assert "| best regression row vs cosent |" in claims.build([main, third], None)


def test_claims_1_and_2_come_from_the_nli_table_on_the_default_backbone_only(tmp_path):
    main = claims.load(_write(tmp_path / "compare", _results(), _paired()), "MiniLM")
    second = claims.Comparison("mpnet", _results(), _paired())
    (tmp_path / "nli").mkdir()
    rows = [{"reference": "smooth_k2", "other": o, "seed": 42, "view": v, "diff": d, "low": d - 0.2, "high": d + 0.2,
             "p_value": p}
            for o, d, p in (("softmax", 1.5, 0.001), ("mse", 0.4, 0.02), ("l1", 2.0, 0.001),
                            ("translated_relu", -0.3, 0.99),
                            ("triplet", 0.1, 0.3), ("simcse_sup", -1.0, 1.0), ("simcse_unsup", 0.5, 0.01))
            for v in ("avg7", "avg7_unseen")]
    pd.DataFrame(rows).to_csv(tmp_path / "nli/paired.csv", index=False)
    md = claims.write([main, second], tmp_path / "nomemory.json", tmp_path / "claims.md", nli_dir=tmp_path / "nli")
    lines = {ln.split("|")[2].strip() + "/" + ln.split("|")[3].strip(): ln for ln in md.splitlines()
             if ln.startswith("| ")}
    assert lines["smooth_k2 vs softmax/all pairs"].startswith("| (1) NLI only")
    assert lines["smooth_k2 vs softmax/all pairs"].endswith("**supported** | not run |")
    assert (
        "**contradicted**" in lines["smooth_k2 vs translated_relu/unseen pairs"]
        and "(2) NLI only" in lines["smooth_k2 vs translated_relu/unseen pairs"]
    )
    assert "**inconclusive**" in lines["smooth_k2 vs triplet/all pairs"]
    # the stage-2 claims still come from each comparison
    assert lines["ours vs translated_relu/all pairs"].count("**supported**") == 2
    # without the NLI table the claims table has no NLI rows
    assert "NLI only" not in claims.write([main], tmp_path / "nomemory.json", tmp_path / "c2.md",
                                          nli_dir=tmp_path / "none")


def test_stsreg_claims_typed_reads_every_backbone_folder(tmp_path, monkeypatch):
    import subprocess
    import sys

    _write(tmp_path / "reports/compare", _results(), _paired())
    _write(tmp_path / "other", _results(), _paired(), backbone="all-mpnet-base-v2")
    (tmp_path / "params.yaml").write_text("model:\n  backbone: default\n")
    run = subprocess.run([sys.executable, "-m", "stsreg.cli", "claims", "--backbone-compare", "other"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    md = (tmp_path / "reports/claims.md").read_text()
    assert "| claim | comparison | view | all-MiniLM-L6-v2 | all-mpnet-base-v2 |" in md  # `default` named as packaged
    # a folder that holds no finished comparison is refused by name, and nothing is written
    (tmp_path / "reports/claims.md").unlink()
    (tmp_path / "half").mkdir()
    run = subprocess.run([sys.executable, "-m", "stsreg.cli", "claims", "--backbone-compare", "half"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "half/results.csv: missing" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "reports/claims.md").exists()
