"""What bad input gets: each class of malformed input, made here on small files, and what the stage does with it.

Classes (README "What bad input gets"): a broken quoted CSV record, undecodable bytes, missing / empty /
truncated raw files, invalid params (unknown key, wrong type, truthy strings, out of range), a bug (not input).
"""

import json
import shutil

import pandas as pd
import pytest
import yaml

import stsreg.cli
from stsreg.infra.config import Params
from stsreg.product.data import readers
from stsreg.product.data.catalogue import nli_parts, sts_parts
from stsreg.product.data.precheck import check_inputs
from stsreg.infra.errors import InputError
from tests.conftest import FIXTURE_RAW, REPO, fixture_registry, fixture_sources

ANLI_HEADER = "context,statement,reason,gold_label,uid\n"


def _anli(tmp_path, body: str):
    path = tmp_path / "anli.csv"
    path.write_text(ANLI_HEADER + body)
    return readers.read_anli_csv(path, tmp_path)


def _accounts(parsed: readers.Parsed, file: str, read: int, kept: int, rejected: int) -> None:
    parsed.check_accounting()
    assert parsed.per_file()[file] == {"read": read, "kept": kept, "rejected": rejected, "skipped": 0}


def test_unbalanced_quote_rejects_one_line_and_reading_resumes(tmp_path):
    out = _anli(tmp_path, 'A cat sat.,A cat is sitting.,r,e,a1\n'
                          '"A broken quote,The rest.,r,n,a2\n'          # the quote never closes
                          'Dogs bark.,Dogs are loud.,r,e,a3\n"A real\nmulti-line context",It spans '
                          'lines.,"two\nlines",c,a4\nBirds fly.,Birds swim.,r,c,a5\n')
    assert [r["hypothesis"] for r in out.rows] == ["A cat is sitting.", "Dogs are loud.", "It spans lines.",
                                                   "Birds swim."]
    assert [r["line"] for r in out.rows] == [2, 4, 5, 8]
    (bad,) = out.rejects
    assert bad["line"] == 3 and "resumed at line 4" in bad["reason"]
    assert bad["raw"] == '"A broken quote,The rest.,r,n,a2'
    _accounts(out, "anli.csv", read=5, kept=4, rejected=1)


def test_csv_parse_error_rejects_the_record_and_reading_resumes(tmp_path):
    out = _anli(tmp_path, 'ok,fine,r,e,a1\n"bad"x,stray text after a quote,r,e,a2\nok2,fine2,r,n,a3\n')
    assert [r["premise"] for r in out.rows] == ["ok", "ok2"]
    (bad,) = out.rejects
    assert bad["line"] == 3 and bad["reason"].startswith("CSV parse error")
    _accounts(out, "anli.csv", read=3, kept=2, rejected=1)


def test_quote_left_open_at_end_of_file_costs_only_its_lines(tmp_path):
    out = _anli(tmp_path, 'ok,fine,r,e,a1\n"open quote,x,r,e,a2\ntail line one\ntail line two\n')
    assert [r["premise"] for r in out.rows] == ["ok"]
    assert [r["line"] for r in out.rejects] == [3, 4, 5]  # each line of the unreadable tail, counted
    _accounts(out, "anli.csv", read=4, kept=1, rejected=3)


def test_undecodable_bytes_reject_the_line_not_the_file(tmp_path):
    (tmp_path / "STSBenchmark").mkdir()
    good = "main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
    path = tmp_path / "STSBenchmark/sts-train.csv"
    path.write_bytes(
        good.encode() + b"main-captions\tMSRvid\t2012test\t0002\t3.8\tA caf\xe9 sign.\tA sign.\n" + good.encode()
    )
    out = readers.read_stsb(path, tmp_path)
    assert len(out.rows) == 2 and [r["line"] for r in out.rows] == [1, 3]
    (bad,) = out.rejects
    assert bad["line"] == 2 and bad["reason"] == readers.NOT_UTF8 and "caf\ufffd" in bad["raw"]
    _accounts(out, "STSBenchmark/sts-train.csv", read=3, kept=2, rejected=1)
    sick = tmp_path / "sick.txt"
    sick.write_bytes(b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\n1\ta\tb\t4.5\n2\t\xff\xfe\tb\t3.0\n")
    out = readers.read_sick(sick, tmp_path)
    assert len(out.rows) == 1 and out.rejects[0]["line"] == 3 and out.rejects[0]["reason"] == readers.NOT_UTF8


def test_every_reader_accounts_for_every_record_of_the_fixture_tree():
    for part in sts_parts() + nli_parts():
        part.read(FIXTURE_RAW).check_accounting()


def _raw_copy(tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE_RAW, raw)
    return raw


def test_missing_empty_and_truncated_files_are_listed_together(tmp_path):
    raw = _raw_copy(tmp_path)
    (raw / "STSBenchmark/sts-dev.csv").unlink()
    (raw / "SICK/SICK_train.txt").write_text("")
    registry = tmp_path / "sources.json"
    entries = fixture_sources()
    for e in entries:
        if e["file"] == "NLI/MNLI/dev_matched.tsv":
            e["min_rows"] = 100
    registry.write_text(json.dumps(entries))
    with pytest.raises(InputError) as err:
        check_inputs(sts_parts() + nli_parts(), raw, registry)
    text = str(err.value)
    assert text.startswith("3 raw file problem(s), nothing was prepared")
    assert "STSBenchmark/sts-dev.csv [stsb/dev]: missing" in text
    assert "SICK/SICK_train.txt [sickr/train]: empty (0 bytes)" in text
    assert "NLI/MNLI/dev_matched.tsv [mnli/dev_matched]: 3 non-blank lines, fewer than min_rows 100" in text


def test_the_real_registry_declares_a_minimum_for_every_file_a_dataset_needs():
    declared = {e["file"]: e.get("min_rows") for e in json.loads((REPO / "data/sources.json").read_text())}
    needed = {f for part in sts_parts() + nli_parts() for f in part.files}
    assert needed <= set(declared) and all(declared[f] and declared[f] > 0 for f in needed)


def _prepare_argv(tmp_path, raw, params):
    return ["prepare", "--params", str(params), "--raw", str(raw), "--registry",
            str(fixture_registry(tmp_path / "sources.json", raw)),
            "--prepared", str(tmp_path / "prepared"), "--rejected", str(tmp_path / "rejected"),
            "--metrics", str(tmp_path / "data.json")]


def test_prepare_cli_exits_2_on_a_missing_file_and_writes_nothing(tmp_path, capsys, own_project):
    raw = _raw_copy(tmp_path)
    (raw / "NLI/XNLI/en_test.tsv").unlink()
    params = tmp_path / "params.yaml"
    params.write_text("prepare:\n  max_rejected_fraction: 1.0\n")
    assert stsreg.cli.main(_prepare_argv(tmp_path, raw, params)) == 2
    assert "NLI/XNLI/en_test.tsv [xnli/test]: missing" in capsys.readouterr().err
    assert not (tmp_path / "prepared").exists() and not (tmp_path / "data.json").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["stage2"].update(lr="fast"), "params.yaml: stage2.lr: expected a float, got 'fast'"),
    (lambda p: p["prepare"]["leakage"].update(remove_from_training="no"),
     "params.yaml: prepare.leakage.remove_from_training: expected a boolean (true/false), got 'no'"),
    (lambda p: p["stage2"].update(batch_size=0), "params.yaml: stage2.batch_size: expected a value >= 1, got 0"),
    (lambda p: p["evaluate"].update(n_resample=10), "params.yaml: evaluate.n_resample: unknown key"),
    (lambda p: p["stage2"].update(loss="hinge"), "params.yaml: stage2.loss: expected one of smooth_k2"),
    (lambda p: p["model"].update(max_length="128"), "params.yaml: model.max_length: expected an integer, got '128'"),
])
def test_bad_params_exit_2_before_any_output_for_every_stage(tmp_path, capsys, edit, message, own_project):
    """prepare does not read stage2/evaluate/model, yet validates the whole file and stops before writing."""
    raw_params = yaml.safe_load((REPO / "params.yaml").read_text())
    edit(raw_params)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw_params))
    assert stsreg.cli.main(_prepare_argv(tmp_path, FIXTURE_RAW, params)) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "prepared").exists() and not (tmp_path / "data.json").exists()


def test_numeric_strings_yaml_leaves_as_text_are_floats_but_nothing_else_is_coerced():
    from stsreg.infra.config import parse_params

    assert parse_params({"stage2": {"lr": "1e-5"}}).stage2.lr == 1e-5  # YAML 1.1 reads 1e-5 as a string
    assert parse_params({"stage2": {"x0": 0}}).stage2.x0 == 0.0  # an int is a float (x0 <= d/2 = 0.5 holds)
    for bad in ({"stage2": {"group_by_length": "yes"}}, {"stage2": {"group_by_length": 1}}, {"seed": 4.2},
                {"compare": {"seeds": "42"}}, {"stage1": None, "stage2": []}):
        with pytest.raises(InputError):
            parse_params(bad)
    assert Params() == parse_params({})


def test_a_bug_is_a_traceback_not_exit_2(tmp_path, monkeypatch, own_project):
    import stsreg.product.data.prepare

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(stsreg.product.data.prepare, "prepare", broken)
    params = tmp_path / "params.yaml"
    params.write_text("{}\n")
    with pytest.raises(KeyError, match="a bug"):
        stsreg.cli.main(_prepare_argv(tmp_path, FIXTURE_RAW, params))


def test_prepare_outputs_are_swapped_in_whole(tmp_path):
    """A second prepare replaces the folders in one rename each; no temporary folder is left behind."""
    from stsreg.product.data.prepare import prepare
    from tests.conftest import replace_params

    params = replace_params(Params(), prepare={"max_rejected_fraction": 1.0, "nli_train": ("snli/dev",)})
    for _ in range(2):
        prepare(FIXTURE_RAW, tmp_path / "prepared", tmp_path / "rejected", tmp_path / "data.json", params,
                registry=fixture_registry(tmp_path / "sources.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json", "prepared", "rejected", "sources.json"]
    assert len(pd.read_parquet(tmp_path / "prepared/nli_train.parquet")) == 2
