"""prepare on the fixture tree: validation rejects with file/line/reason, counts, caps, duplicates, leakage."""

import json
from pathlib import Path

import pandas as pd
import pytest

from stsreg.infra.config import ExtraNLISource, Params
from stsreg.product.data.prepare import PrepareError, prepare
from stsreg.infra.errors import InputError
from stsreg.infra.settings_data import OFFLINE_NLI
from tests.conftest import fixture_registry, replace_params

ALL_NLI = OFFLINE_NLI


def run(raw: Path, tmp: Path, **sections):
    base = replace_params(Params(), prepare={"max_rejected_fraction": 1.0, "nli_train": ALL_NLI})
    params = replace_params(base, **sections) if sections else base
    metrics = prepare(raw, tmp / "prepared", tmp / "rejected", tmp / "metrics.json", params,
                      registry=fixture_registry(tmp / "sources.json", raw))
    return metrics, tmp / "prepared", tmp / "rejected"


def test_rejects_carry_file_line_reason(raw_tree, tmp_path):
    metrics, prepared, rejected = run(raw_tree, tmp_path)
    rej = pd.read_parquet(rejected / "stsb.parquet").set_index("line")
    assert list(rej.columns) == ["dataset", "split", "file", "reason", "raw"]
    assert (rej.file == "STSBenchmark/sts-train.csv").all()
    assert rej.loc[4, "reason"] == "expected 7 or 9 tab-separated fields, got 6"      # truncated row
    assert rej.loc[5, "reason"] == "score is not a number: 'nan'"                     # NaN score
    assert rej.loc[6, "reason"] == "sentence1 fails empty after stripping whitespace: ''"  # empty sentence
    assert rej.loc[8, "reason"] == "score fails in_range(0.0, 5.0): 7.5"              # out of range
    assert rej.loc[9, "reason"] == "score is not a number: 'abc'"
    assert metrics["datasets"]["stsb"]["rejected"] == 5
    sick = pd.read_parquet(rejected / "sickr.parquet")
    assert sick.reason.tolist() == ["score fails in_range(1.0, 5.0): 0.5"]             # SICK is 1-5
    snli = pd.read_parquet(rejected / "snli.parquet")
    assert snli.reason.tolist() == ["label fails isin(['contradiction', 'neutral', 'entailment']): 'maybe'"]
    assert snli.file.tolist() == ["NLI/SNLI_senteval_tokenized/s1.test"] and snli.line.tolist() == [2]
    # every dataset has a rejects file, empty or not
    assert {p.stem for p in rejected.glob("*.parquet")} >= {"sts12", "sts16", "stsb", "sickr", "snli", "anli"}


def test_nothing_lost_read_equals_kept_plus_rejected(raw_tree, tmp_path):
    metrics, prepared, _ = run(raw_tree, tmp_path)
    sts = pd.read_parquet(prepared / "sts.parquet")
    nli = pd.read_parquet(prepared / "nli.parquet")
    for name, d in metrics["datasets"].items():
        assert d["read"] == d["kept"] + d["rejected"], name
        table = sts[sts.dataset == name] if name in set(sts.dataset) else nli[nli.source == name]
        assert len(table) == d["kept"], name
    assert (
        metrics["datasets"]["sts15"]["unscored_skipped"] == 5 and metrics["datasets"]["sts16"]["unscored_skipped"] == 5
    )
    assert json.loads((prepared / "summary.json").read_text()) == metrics  # the full summary, beside the tables
    assert json.loads((tmp_path / "metrics.json").read_text()) == {   # its headline: what `dvc metrics show` prints
        "rows_kept": sum(d["kept"] for d in metrics["datasets"].values()), "rows_rejected": metrics["rejected_total"],
        "nli_train_rows": metrics["nli_train_rows"], "train_rows_removed_for_leakage": 0,
        "test_pairs_seen_in_train": sum(d["seen_normalized"] for d in metrics["leakage"].values())}


def test_tables_schema_and_normalisation(raw_tree, tmp_path):
    _, prepared, _ = run(raw_tree, tmp_path)
    sts = pd.read_parquet(prepared / "sts.parquet")
    assert list(sts.columns[:6]) == ["dataset", "subset", "split", "sentence1", "sentence2", "score"]
    assert sts.score.dtype == float
    assert (sts.sentence1 == sts.sentence1.str.strip()).all()
    row = sts[(sts.dataset == "stsb") & (sts.line == 3)].iloc[0]
    assert row.sentence1 == "The cat sat." and row.score == 1.5
    nli = pd.read_parquet(prepared / "nli.parquet")
    assert list(nli.columns[:5]) == ["source", "split", "premise", "hypothesis", "label"]
    labels = dict(zip(nli.hypothesis, nli.label))
    assert (
        labels["The sisters are hugging ."] == 1 and labels["A man sleeps ."] == 0 and labels["An animal moves ."] == 2
    )
    assert labels["Linguistics studies language."] == 2  # ANLI "e"


def test_duplicates_flagged_by_default_rejected_on_request(raw_tree, tmp_path):
    metrics, prepared, _ = run(raw_tree, tmp_path / "a")
    assert metrics["datasets"]["stsb"]["duplicate_pairs"] == 1
    assert metrics["datasets"]["stsb"]["rows_train"] == 5  # 10 lines - 5 rejects; the duplicate is kept
    metrics, _, rejected = run(raw_tree, tmp_path / "b", prepare={"duplicate_pairs": "reject"})
    rej = pd.read_parquet(rejected / "stsb.parquet").set_index("line")
    assert rej.loc[7, "reason"] == "duplicate pair within split (first occurrence kept)"
    assert metrics["datasets"]["stsb"]["rows_train"] == 4


def _tree_bytes(*folders: Path) -> dict:
    return {p: p.read_bytes() for f in folders for p in sorted(f.rglob("*")) if p.is_file()}


def test_rejected_fraction_cap_refuses_writes_rejects_aside_and_replaces_nothing(raw_tree, tmp_path):
    run(raw_tree, tmp_path, prepare={"nli_train": ("snli/dev",)})  # an earlier run's outputs
    before = _tree_bytes(tmp_path / "prepared", tmp_path / "rejected") | {"m": (tmp_path / "metrics.json").read_bytes()}
    with pytest.raises(PrepareError) as err:
        run(raw_tree, tmp_path, prepare={"max_rejected_fraction": 0.2})
    msg = str(err.value)
    aside = tmp_path / "rejected.refused" / "stsb.parquet"
    assert "stsb: 5 of 14 rows" in msg and str(aside) in msg and "nothing was replaced" in msg
    assert len(pd.read_parquet(aside)) == 5  # the rows the message points at
    after = _tree_bytes(tmp_path / "prepared", tmp_path / "rejected") | {"m": (tmp_path / "metrics.json").read_bytes()}
    assert after == before


def test_nli_training_sources_are_a_param(raw_tree, tmp_path):
    metrics, prepared, _ = run(raw_tree, tmp_path, prepare={"nli_train": ("mnli/dev_matched", "snli_cad/train")})
    train = pd.read_parquet(prepared / "nli_train.parquet")
    assert sorted(set(train.source + "/" + train.split)) == ["mnli/dev_matched", "snli_cad/train"]
    assert metrics["nli_train_rows"] == 4
    with pytest.raises(InputError, match="unknown NLI entries"):
        run(raw_tree, tmp_path / "x", prepare={"nli_train": ("snli/train",)})


def test_official_jsonl_extra_source(raw_tree, tmp_path):
    extra = (ExtraNLISource(name="snli", split="train", file="NLI/snli_1.0/snli_1.0_train.jsonl"),)
    metrics, prepared, rejected = run(raw_tree, tmp_path, fetch={"extra_nli": extra},
                                      prepare={"nli_train": ("snli/train",)})
    train = pd.read_parquet(prepared / "nli_train.parquet")
    assert train.hypothesis.tolist() == ["A person is training a horse.", "Animals play."]
    reasons = pd.read_parquet(rejected / "snli.parquet").reason.tolist()
    assert any(r.startswith("bad jsonl record") for r in reasons)
    assert "label fails isin(['contradiction', 'neutral', 'entailment']): '-'" in reasons  # no gold consensus


def test_leakage_marks_and_optionally_removes(raw_tree, tmp_path):
    metrics, prepared, _ = run(raw_tree, tmp_path / "a")
    sts = pd.read_parquet(prepared / "sts.parquet")
    seen = sts[sts.seen_in_train & (sts.dataset == "sts12")]
    # STS12 MSRvid holds the STS-B train pair verbatim and another one reversed, recased and re-spaced
    assert sorted(seen.sentence1) == ["A plane is taking off.", "a man is exercising."]
    assert metrics["leakage"]["sts12"]["seen_exact"] == 1 and metrics["leakage"]["sts12"]["seen_normalized"] == 2
    # SICK test shares one pair with SICK train; STS-B test shares none
    assert (
        metrics["leakage"]["sickr"]["seen_in_sickr_train"] == 1 and metrics["leakage"]["stsb"]["seen_normalized"] == 0
    )
    assert not sts[sts.split != "test"].seen_in_train.any()

    metrics, prepared, _ = run(raw_tree, tmp_path / "b", prepare={"leakage": {"remove_from_training": True}})
    # the plane pair occurs twice in STS-B train (a flagged duplicate): both copies go
    assert metrics["leakage_removed"] == {"stsb_train": 3, "sickr_train": 1, "nli_train": 0}
    sts = pd.read_parquet(prepared / "sts.parquet")
    assert len(sts[(sts.dataset == "stsb") & (sts.split == "train")]) == 2
    leak = pd.read_parquet(prepared / "leakage.parquet")
    assert leak.removed_from_training.sum() == 4
