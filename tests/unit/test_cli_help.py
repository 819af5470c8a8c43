"""The CLI follows argparse's conventions: `--version`, and every subcommand's help renders, every flag has help,
and each flag with a default shows it."""

import argparse
import contextlib
import io

import pytest

from stsreg import __version__
from tests.conftest import REPO
from stsreg.cli import build_parser, main

SUBCOMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"stsreg {__version__}"


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_help_renders_with_every_flag_explained_and_its_default(name, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping inside a default
    sub = build_parser()._subparsers._group_actions[0].choices[name]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        sub.parse_args(["--help"])
    text = " ".join(out.getvalue().split())
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"stsreg {name} {action.option_strings or action.dest}: no help"
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert f"(default: {action.default})" in text, f"stsreg {name} {action.option_strings}: default not shown"


def test_make_help_lists_every_target_readably():
    """`make help`: no unexpanded make variable, and every target name apart from its description."""
    import re
    import subprocess

    out = subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "$(" not in out and "\033" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    targets = re.findall(r"^([a-zA-Z_-]+):.*## ", (REPO / "Makefile").read_text(), re.M)
    assert [line.split()[0] for line in lines] == targets
    assert all(re.match(r"^  [a-z0-9-]+ +\S", line) and "  " in line.strip() for line in lines)
