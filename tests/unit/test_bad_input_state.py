"""What bad input gets, continued: the classes where a run used to go wrong with exit 0 or lose data.

Each test writes its own files (a copy of the fixture tree, a params file, a registry): bare YAML 1.1 booleans,
a raw file changed after fetch, a missing registry, a deliberate local edit, a refusal that must replace nothing (in
test_prepare), a normalised label, a bad gold score, duplicate pairs, a binary file in place of a text file.
The checkpoint keyed with its code is tested in test_train (it trains).
"""

import json
import re

import pandas as pd
import pytest
import yaml

import stsreg.cli
from stsreg.infra.config import Params
from stsreg.product.data.prepare import prepare
from tests.conftest import FIXTURE_RAW, REPO, fixture_registry, replace_params

ALL_NLI = ("snli/dev", "mnli/dev_matched", "anli/dev_r1")


def _argv(tmp_path, params, raw=FIXTURE_RAW, registry=None):
    registry = registry or fixture_registry(tmp_path / "sources.json", raw)
    return ["prepare", "--params", str(params), "--raw", str(raw), "--registry", str(registry),
            "--prepared", str(tmp_path / "prepared"), "--rejected", str(tmp_path / "rejected"),
            "--metrics", str(tmp_path / "data.json")]


def _nothing_written(tmp_path) -> bool:
    return not (tmp_path / "prepared").exists() and not (tmp_path / "data.json").exists()


@pytest.mark.parametrize("section, key, written, expected", [
    ("prepare.leakage", "remove_from_training", "yes", "a boolean (true/false)"),   # YAML 1.1 would say true
    ("stage2", "lr", "no", "a float"),                                              # ... false, then "got False"
    ("stage2", "loss", "on", "a string"),                                           # ... true
    ("model", "precision", "Off", "a string"),
])
def test_a_bare_yaml_11_boolean_is_refused_in_any_field_quoting_what_was_written(
        tmp_path, capsys, own_project, section, key, written, expected):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    node = raw
    for part in section.split("."):
        node = node[part]
    node[key] = "@@"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw, sort_keys=False).replace("'@@'", written))
    assert f"{key}: {written}\n" in params.read_text()  # bare, as a user types it
    assert stsreg.cli.main(_argv(tmp_path, params)) == 2
    err = capsys.readouterr().err
    assert f"params.yaml: {section}.{key}: bare `{written}` is ambiguous" in err and f"expected {expected}" in err
    assert _nothing_written(tmp_path)


def test_quoted_words_and_yaml_12_booleans_are_taken_as_written(tmp_path):
    from stsreg.infra.config import load_params

    path = tmp_path / "params.yaml"
    path.write_text("prepare:\n  leakage:\n    remove_from_training: True\nschedule:\n  timezone: 'no'\n")
    p = load_params(path)
    assert p.prepare.leakage.remove_from_training is True and p.schedule.timezone == "no"


def _cut(path, lines: int) -> None:
    keep = path.read_text(encoding="utf-8").splitlines(keepends=True)[:-lines]
    path.write_text("".join(keep), encoding="utf-8")


def test_a_raw_file_cut_after_fetch_exits_2_naming_it_both_hashes_and_the_fix(raw_tree, tmp_path, capsys, own_project):
    registry = fixture_registry(tmp_path / "sources.json", raw_tree)  # what fetch verified
    _cut(raw_tree / "STSBenchmark/sts-dev.csv", 1)
    params = tmp_path / "params.yaml"
    params.write_text("prepare:\n  max_rejected_fraction: 1.0\n")
    assert stsreg.cli.main(_argv(tmp_path, params, raw_tree, registry)) == 2
    err = capsys.readouterr().err
    entry = next(e for e in json.loads(registry.read_text()) if e["file"] == "STSBenchmark/sts-dev.csv")
    assert "STSBenchmark/sts-dev.csv [stsb/dev]: changed since fetch" in err
    assert f"registered {entry['bytes']}" in err and f"registered {entry['sha256']}" in err
    assert "stsreg fetch" in err and "dvc checkout" in err
    assert _nothing_written(tmp_path)


def test_a_missing_registry_is_an_error_not_a_skipped_check(tmp_path, capsys, own_project):
    params = tmp_path / "params.yaml"
    params.write_text("prepare:\n  max_rejected_fraction: 1.0\n")
    assert stsreg.cli.main(_argv(tmp_path, params, registry=tmp_path / "absent.json")) == 2
    assert "absent.json: the sources registry is missing" in capsys.readouterr().err
    assert _nothing_written(tmp_path)


def test_local_edits_are_prepared_only_when_opted_in_and_then_listed(raw_tree, tmp_path):
    registry = fixture_registry(tmp_path / "sources.json", raw_tree)
    _cut(raw_tree / "STSBenchmark/sts-dev.csv", 1)
    params = replace_params(Params(), prepare={"max_rejected_fraction": 1.0, "nli_train": ALL_NLI,
                                               "allow_local_edits": True})
    summary = prepare(raw_tree, tmp_path / "prepared", tmp_path / "rejected", tmp_path / "data.json", params,
                      registry=registry)
    (changed,) = summary["raw_files_changed"]
    assert changed.startswith("STSBenchmark/sts-dev.csv: ")
    assert json.loads((tmp_path / "prepared/summary.json").read_text())["raw_files_changed"] == [changed]


def test_training_runs_tag_the_locally_edited_files(tmp_path):
    from pipelines.product.training_run import run_tags

    table = tmp_path / "prepared/sts.parquet"
    table.parent.mkdir()
    pd.DataFrame({"a": [1]}).to_parquet(table)
    (tmp_path / "prepared/summary.json").write_text(json.dumps({"raw_files_changed": ["STS12/x.txt: 3 bytes"]}))
    assert run_tags([str(table)])["data.raw_files_changed"] == "STS12/x.txt: 3 bytes"
    (tmp_path / "prepared/summary.json").write_text(json.dumps({"raw_files_changed": []}))
    assert "data.raw_files_changed" not in run_tags([str(table)])


def _prepare(raw, tmp_path, **prepare_params):
    params = replace_params(Params(), prepare={"max_rejected_fraction": 1.0, "nli_train": ALL_NLI, **prepare_params})
    return prepare(raw, tmp_path / "prepared", tmp_path / "rejected", tmp_path / "data.json", params,
                   registry=fixture_registry(tmp_path / "sources.json", raw))


def test_every_normalisation_is_counted_per_dataset(raw_tree, tmp_path):
    mnli = raw_tree / "NLI/MNLI/dev_matched.tsv"
    mnli.write_text(mnli.read_text().replace("\tentailment\t", "\tEntailment\t", 1))
    base = _prepare(FIXTURE_RAW, tmp_path / "base")["datasets"]
    edited = _prepare(raw_tree, tmp_path / "edited")["datasets"]
    assert edited["mnli"]["labels_normalised"] == base["mnli"]["labels_normalised"] + 1
    assert edited["mnli"]["kept"] == base["mnli"]["kept"]  # lowercased and kept, now counted
    assert base["anli"]["labels_normalised"] >= 1  # ANLI's one-letter labels are mapped by the reader: counted too
    for name, entry in base.items():
        assert "texts_stripped" in entry and ("scores_stripped" in entry or "labels_normalised" in entry), name


def test_a_bad_gold_score_is_reported_against_the_gold_file_that_holds_it(raw_tree, tmp_path):
    gold = raw_tree / "STS12/STS.gs.MSRpar.txt"
    lines = gold.read_text().splitlines()
    lines[1] = "-1"
    gold.write_text("\n".join(lines) + "\n")
    _prepare(raw_tree, tmp_path)
    rejects = pd.read_parquet(tmp_path / "rejected/sts12.parquet")
    (row,) = rejects[rejects.reason.str.contains("-1.0")].itertuples()
    assert (row.file, row.line) == ("STS12/STS.gs.MSRpar.txt", 2)


def test_duplicate_pairs_are_listed_with_their_lines(raw_tree, tmp_path):
    sick = raw_tree / "SICK/SICK_train.txt"
    lines = sick.read_text().splitlines()
    lines.append(lines[1])  # the first record again, at the end
    sick.write_text("\n".join(lines) + "\n")
    summary = _prepare(raw_tree, tmp_path)
    dups = pd.read_parquet(tmp_path / "rejected/duplicates.parquet")
    mine = dups[(dups.dataset == "sickr") & (dups.split == "train")]
    assert mine[["file", "line", "first_line"]].values.tolist() == [["SICK/SICK_train.txt", len(lines), 2]]
    assert len(dups[~dups.rejected]) == sum(d["duplicate_pairs"] for d in summary["datasets"].values())


def test_random_bytes_in_place_of_a_text_file_are_called_not_text(raw_tree, tmp_path, capsys, own_project):
    import random

    registry = fixture_registry(tmp_path / "sources.json", raw_tree)
    (raw_tree / "STSBenchmark/sts-test.csv").write_bytes(random.Random(0).randbytes(20000))
    params = tmp_path / "params.yaml"
    params.write_text("prepare:\n  max_rejected_fraction: 1.0\n  allow_local_edits: true\n")
    assert stsreg.cli.main(_argv(tmp_path, params, raw_tree, registry)) == 2
    err = capsys.readouterr().err
    assert "STSBenchmark/sts-test.csv [stsb/test]: not a text file" in err and "truncated" not in err


@pytest.mark.parametrize("argv, first", [
    (["evaluate"], "prepare"), (["train", "--stage", "2"], "prepare"), (["train", "--stage", "1"], "prepare"),
    (["register"], "stage2"), (["search"], "prepare"),
])
def test_a_stage_run_out_of_order_names_what_is_missing_and_what_to_run(tmp_path, capsys, own_project, argv, first):
    import shutil
    import time

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    started = time.monotonic()
    assert stsreg.cli.main(argv) == 2
    assert time.monotonic() - started < 2  # before any Prefect server starts
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1 and "is missing (written by the `" in err and f"run `dvc repro {first}` first" in err
    )


@pytest.mark.parametrize("argv", [["train", "--stage", "2", "--sts", "mine.parquet", "--stage1-dir", "m1"],
                                  ["evaluate", "--sts", "mine.parquet", "--model", "m1"]])
def test_a_table_without_the_prepared_columns_is_one_line_naming_what_it_has(tmp_path, capsys, own_project, argv):
    """A user table passed as --sts (no `dataset` column) used to end in three tracebacks and a FAILED MLflow run."""
    import shutil

    import pandas as pd

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "m1").mkdir()
    pd.DataFrame({"sentence1": ["a"], "sentence2": ["b"], "score": [1.0],
                  "split": ["train"]}).to_parquet(tmp_path / "mine.parquet")
    assert stsreg.cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mine.parquet has no column(s) ['dataset']" in err and "'sentence1'" in err
    assert not (tmp_path / "mlflow").exists()  # refused before any run was created
    (tmp_path / "mine.parquet").write_text("sentence1,sentence2,score\n")
    assert stsreg.cli.main(argv) == 2 and "is not a Parquet table" in capsys.readouterr().err


@pytest.mark.parametrize("spoil,message", [
    (lambda t: t.assign(score=t.score * 20), r"score\(s\) lie outside the 0-5 scale every prepared table is on"),
    (lambda t: t.assign(score=t.score.where(t.index % 7 != 0)), r"score\(s\) are NaN or infinite"),
    (lambda t: t.assign(score=t.score.astype(str) + "x"), r"its score column holds \w+ values \(e.g. '[\d.]+x'\), not "
                                                          r"numbers"),
    (lambda t: t[t.split != "train"], r"no train rows of stage2.train_tables \['stsb', 'sickr'\]"),
    (lambda t: t[t.split != "dev"], r"no dev rows of stage2.dev_table 'stsb'"),
])
def test_a_stage2_table_given_with_sts_passes_prepares_checks_before_any_flow(tmp_path, capsys, own_project, spoil,
                                                                              message):
    """`stsreg train --stage 2 --sts T.parquet`: scores x20 and NaN used to train (loss 6082, "dev Spearman nan", exit
    0), strings to end in three tracebacks, a table with no train rows to be refused ~24 s in after two tracebacks."""
    import shutil

    import pandas as pd

    from tests.conftest import tiny_sts

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "s1").mkdir()
    train, dev = tiny_sts(40, 1).assign(split="train"), tiny_sts(20, 2).assign(split="dev")
    table = pd.concat([train, dev], ignore_index=True).assign(dataset="stsb")
    spoil(table).to_parquet(tmp_path / "T.parquet")
    argv = ["train", "--stage", "2", "--sts", "T.parquet", "--stage1-dir", "s1", "--stage2-dir", "out"]
    assert stsreg.cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err) and "stage 2 cannot train on it" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow").exists()
