"""``python -m benchmarks.compare_cost`` (the cost of each comparison row on a machine) as the backbones page prints it:
a backbone built from its config with random weights, rows trained and evaluated by the comparison's own code, the
report rewritten after each row, and the deadline that keeps a run on a lent machine inside its minutes."""

import json
import shutil

import pandas as pd
import yaml

from tests.conftest import REPO, TINY_WORDS, tiny_eval_table, tiny_sts
from tests.helpers.backbones import tiny_backbone_of
from tests.helpers.nli import grouped_nli


def _config_only(tmp_path):
    """A tiny MPNet's folder without its weights: what a GPU machine receives when the weights cannot travel."""
    src = tiny_backbone_of("mpnet", tmp_path / "tiny-mpnet", list(TINY_WORDS))
    folder = tmp_path / "config-only"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    return src, folder


def test_random_weights_keep_the_architecture(tmp_path):
    from safetensors.torch import load_file
    from benchmarks.compare_cost import random_backbone

    src, folder = _config_only(tmp_path)
    built = random_backbone(folder, tmp_path / "built")
    ours, theirs = load_file(built / "model.safetensors"), load_file(f"{src}/model.safetensors")
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}
    assert (built / "tokenizer.json").is_file() and not (folder / "model.safetensors").exists()


def test_rows_are_timed_reported_and_the_deadline_holds(harness, tmp_path, monkeypatch):
    from benchmarks.compare_cost import main

    monkeypatch.chdir(tmp_path)
    _, folder = _config_only(tmp_path)
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(max_length=16)
    raw["stage1"].update(epochs=1)
    raw["stage2"].update(batch_size=8, eval_every=100, checkpoint_every_s=3600)
    raw["evaluate"].update(max_length=16, n_resamples=50)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    train = tiny_sts(48, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(48),
                                        seen_in_train=False)
    pd.concat([tiny_eval_table(24), train], ignore_index=True).to_parquet(tmp_path / "sts.parquet")
    grouped_nli(14).to_parquet(tmp_path / "nli.parquet")
    common = ["--random-weights-from", str(folder), "--sts", "sts.parquet", "--nli", "nli.parquet", "--precision",
              "fp32"]

    assert main(["--rows", "base,cosent,ours", *common, "--out", "cost"]) == 0
    report = json.loads((tmp_path / "cost.json").read_text())
    rows = {r["row"]: r for r in report["rows"]}
    assert list(rows) == ["base", "cosent", "ours"] and report["weights"].startswith("random")
    assert rows["base"]["stage2_s"] is None and rows["base"]["eval_s"] > 0
    assert rows["cosent"]["steps"] == 6 and rows["cosent"]["stage1_s"] is None and rows["cosent"]["stage2_s"] > 0
    assert rows["ours"]["stage1_s"] > 0  # the first row that starts from stage 1 trains it, timed apart
    assert all(r["precision"] == "fp32" and r["eval_peak_gb"] > 0 for r in rows.values())
    md = (tmp_path / "cost.md").read_text()
    assert md.count("\n| ") == 4 and "| cosent | 42 | - |" in md
    assert not list(tmp_path.glob("reports")), "nothing under reports/ is written"

    # past the deadline the first row still runs; no other starts
    assert main(["--rows", "base,cosent", *common, "--deadline-s", "0", "--out", "cut"]) == 0
    assert [r["row"] for r in json.loads((tmp_path / "cut.json").read_text())["rows"]] == ["base"]
