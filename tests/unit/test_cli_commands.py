"""Subcommands are declared once (stsreg.cli.COMMANDS): one entry is a command that `stsreg --help` lists, whose
inputs are checked before it runs (exit 2 naming the stage to run first), and that holds the pipeline lock when it
is a stage."""

import pytest

from stsreg import cli


def _toy(sub, name: str) -> None:
    t = sub.add_parser(name, help="a toy stage reading a table prepare writes")
    t.add_argument("--table", default="data/prepared/toy.parquet")
    t.set_defaults(func=lambda args: print("toy ran") or 0)


@pytest.fixture
def toy(monkeypatch):
    commands = {**cli.COMMANDS, "toy": cli.Command(_toy, stage=True, needs=lambda a: [(a.table, "prepare")])}
    monkeypatch.setattr(cli, "COMMANDS", commands)


def test_one_entry_is_a_listed_checked_locked_command(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert "toy" in cli.build_parser().format_help()
    assert cli.main(["toy"]) == 2  # its input is missing: refused before anything runs, naming the stage to run
    assert (
        "data/prepared/toy.parquet is missing (written by the `prepare` stage): run `dvc repro prepare` first"
        in capsys.readouterr().err
    )
    (tmp_path / "data/prepared").mkdir(parents=True)
    (tmp_path / "data/prepared/toy.parquet").write_bytes(b"")
    assert cli.main(["toy"]) == 0 and "toy ran" in capsys.readouterr().out
    assert (tmp_path / ".stsreg").is_dir()  # a stage takes the project's pipeline lock (its folder stays)


@pytest.mark.parametrize("argv, first", [(["prepare"], "fetch"), (["train", "--stage", "1"], "prepare"),
                                         (["train", "--stage", "2"], "prepare"), (["evaluate"], "prepare"),
                                         (["register"], "stage2"), (["compare"], "prepare"), (["search"], "prepare")])
def test_each_stage_run_out_of_order_names_the_stage_to_run_first(argv, first, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("seed: 42\n")
    assert cli.main(argv) == 2
    assert f"run `dvc repro {first}` first" in capsys.readouterr().err


def test_the_table_says_which_commands_are_stages_and_load_the_backbone():
    stages = {n for n, c in cli.COMMANDS.items() if c.stage}
    assert stages == {"fetch", "prepare", "train", "evaluate", "register", "promote", "compare", "nli-table",
                      "baselines", "search", "claims", "profile"}
    assert {n for n, c in cli.COMMANDS.items() if c.backbone} == {"train", "promote", "compare", "nli-table",
                                                                  "baselines", "search", "profile"}
