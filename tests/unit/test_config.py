"""Params loading, and dvc.yaml declaring exactly the params each stage's code reads."""

import dataclasses
import json
import shutil

import pytest
import yaml

import stsreg.cli
import stsreg.commands.pipeline
from stsreg.infra.config import Params, load_params, param_keys
from stsreg.infra.errors import ParamsError
from tests.conftest import FIXTURE_RAW, REPO
from tests.helpers.params import Recorder, declared


def test_params_yaml_loads_and_matches_dataclasses():
    params = load_params(REPO / "params.yaml")
    assert params.prepare.max_rejected_fraction == 0.01
    assert params.prepare.leakage.match == "normalized"
    raw = yaml.safe_load((REPO / "params.yaml").read_text())

    def leaves(d, prefix=""):
        out = set()
        for k, v in d.items():
            out |= leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}"}  # {}: a mapping knob
        return out

    assert leaves(raw) == param_keys(Params)  # every knob is in params.yaml, and nothing else


def test_unknown_key_is_an_error(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("prepare:\n  leakage:\n    mach: exact\n")
    with pytest.raises(ParamsError, match=r"params.yaml: prepare.leakage.mach: unknown key"):
        load_params(p)


def test_dvc_yaml_declares_exactly_what_each_stage_reads(tmp_path, monkeypatch, own_project):
    from stsreg.infra.config import with_overrides

    # the fixture's broken rows would stop prepare at the reject cap before it reads the leakage settings
    real = with_overrides(load_params(REPO / "params.yaml"), {"prepare.max_rejected_fraction": 1.0})
    mirror = tmp_path / "mirror"
    shutil.copytree(FIXTURE_RAW, mirror)
    (tmp_path / "sources.json").write_text("[]")
    seen: dict[str, set] = {}
    for stage, argv in {
        "fetch": ["fetch", "--registry", str(tmp_path / "sources.json"), "--mirror", str(mirror), "--out",
                  str(tmp_path / "raw")],
        "prepare": ["prepare", "--raw", str(FIXTURE_RAW), "--registry", str(tmp_path / "sources.json"), "--prepared",
                    str(tmp_path / "p"), "--rejected", str(tmp_path / "r"),
                    "--metrics", str(tmp_path / "m.json")],
    }.items():
        seen[stage] = set()
        recorder = lambda path, s=seen[stage]: Recorder(real, s)  # noqa: E731
        monkeypatch.setattr(stsreg.cli, "load_params", recorder)
        monkeypatch.setattr(stsreg.commands.pipeline, "load_params", recorder)
        stsreg.cli.main(argv)
        assert seen[stage] == declared(stage), stage
    assert seen["fetch"] == {"fetch.mirror", "fetch.allow_download", "fetch.extra_nli"}


def test_dvc_yaml_stage_commands_are_cli_subcommands():
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    commands = set(stsreg.cli.build_parser()._subparsers._group_actions[0].choices)
    for name, stage in spec.items():
        cmd = stage.get("do", stage)["cmd"]  # a foreach stage's command is in its `do`
        assert cmd.split()[0] == "stsreg" and cmd.split()[1] in commands, name


class SectionRecorder:
    """Records which top-level params (sections) the code reads; returns the real values."""

    def __init__(self, obj, seen: set):
        self._obj, self._seen = obj, seen

    def __getattr__(self, name):
        self._seen.add(name)
        return getattr(self._obj, name)


def test_training_stages_read_exactly_their_declared_sections(tiny_backbone, tmp_path):
    import pandas as pd

    from stsreg.product.runners.stage1_runner import run_stage1
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start
    from tests.conftest import tiny_sts
    from tests.helpers.nli import grouped_nli

    params = dataclasses.replace(
        load_params(REPO / "params.yaml"),
        model=dataclasses.replace(load_params(REPO / "params.yaml").model, backbone=tiny_backbone, max_length=16),
    )
    params = dataclasses.replace(params, stage2=dataclasses.replace(params.stage2, batch_size=8, eval_every=5))
    # triples: the default stage 1 trains the encoder on them first
    grouped_nli(12).to_parquet(tmp_path / "nli.parquet")
    sts = pd.concat([tiny_sts(24).assign(dataset="stsb", split="train"),
                     tiny_sts(16, 1).assign(dataset="stsb", split="dev")])
    sts.to_parquet(tmp_path / "sts.parquet")
    top = lambda keys: {k.split(".")[0] for k in keys}  # noqa: E731
    seen1, seen2 = set(), set()
    run_stage1(SectionRecorder(params, seen1), tmp_path / "nli.parquet", tmp_path / "s1", tmp_path / "cache",
               ckpt_dir=tmp_path / "ck")
    assert seen1 == top(declared("stage1")) == {"seed", "model", "stage1"}
    run_stage2(Start(tmp_path / "s1", SectionRecorder(params, seen2)), tmp_path / "sts.parquet", tmp_path / "s2",
               tmp_path / "ck")
    # `launch` (how many processes) is read by the command that starts the runner (stsreg.commands.train.cmd_train);
    # `evaluate.max_length` by the flow's publish step, which gives the folder the length it is scored and served at
    seen_publish = set()
    from pipelines.product.stage2_flow import publish

    publish(SectionRecorder(params, seen_publish), tmp_path / "s2",
            json.loads((tmp_path / "s2/training_summary.json").read_text()))
    assert json.loads((tmp_path / "s2/stsreg_model.json").read_text())["max_length"] == params.evaluate.max_length
    assert "evaluate" in seen_publish
    assert seen2 | {"launch", "evaluate"} == top(declared("stage2")) == {"seed", "model", "stage2", "launch",
                                                                         "evaluate"}
    assert (tmp_path / "s2/head.safetensors").exists()


def test_evaluate_stage_reads_exactly_its_declared_params(tiny_backbone, tmp_path):
    from stsreg.product.runners.eval_runner import run_evaluate
    from tests.conftest import tiny_eval_table

    real = load_params(REPO / "params.yaml")
    params = dataclasses.replace(real, evaluate=dataclasses.replace(real.evaluate, max_length=16, n_resamples=50))
    tiny_eval_table(30).to_parquet(tmp_path / "sts.parquet")
    seen: set = set()
    run_evaluate(Recorder(params, seen), tiny_backbone, tmp_path / "sts.parquet", tmp_path / "eval")
    assert seen == declared("evaluate")
    assert (tmp_path / "eval/metrics.json").exists() and (tmp_path / "eval/predictions.parquet").exists()


def test_presets_validate_and_print_as_dvc_overrides(capsys):
    from stsreg.infra.config import PRESETS, with_overrides

    params = load_params(REPO / "params.yaml")
    paper = with_overrides(params, PRESETS["paper"])
    s = paper.stage2
    assert (s.lr, s.epochs, s.batch_size, s.warmup_ratio, s.max_grad_norm, s.labels, s.zero_negative, s.eval_every,
            s.keep) == (5e-5, 4, 16, 0.2, 10.0, "truncate", True, 50, "trained")
    # the paper's stage 1 trains the head only: no encoder step; nothing else of stage 1 changes
    assert paper.model.max_length == 256 and paper.stage1.encoder.objective == "none"
    assert dataclasses.replace(paper.stage1, encoder=params.stage1.encoder) == params.stage1
    with pytest.raises(ParamsError, match="stage2.labels"):
        with_overrides(params, {"stage2.labels": "floor"})
    assert stsreg.cli.main(["preset", "paper", "--params", str(REPO / "params.yaml")]) == 0
    words = capsys.readouterr().out.split()
    assert words[0::2] == ["-S"] * len(PRESETS["paper"])
    assert "stage2.labels=truncate" in words and "stage2.zero_negative=true" in words
    gpu = with_overrides(params, PRESETS["baselines_gpu"])
    assert gpu.baselines.backbone == "bert-base-uncased" and gpu.stage2 == params.stage2


def test_preset_writes_a_params_file_that_loads(tmp_path):
    from stsreg.infra.config import PRESETS, with_overrides

    out = tmp_path / "params-paper.yaml"
    assert stsreg.cli.main(["preset", "paper", "--params", str(REPO / "params.yaml"), "--write", str(out)]) == 0
    assert load_params(out) == with_overrides(load_params(REPO / "params.yaml"), PRESETS["paper"])


def test_search_stage_reads_only_the_stage2_settings_trials_do_not_search():
    from stsreg.experiments import search

    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["search"]
    fixed = {p.removeprefix("stage2.") for p in stage["params"] if p.startswith("stage2.")}
    assert fixed == set(search.FIXED)
    searched = {f.name for f in dataclasses.fields(Params().stage2)} - fixed
    # every stage-2 knob is either fixed for the search or set by each trial
    # ... or not read by a trial at all: each trial starts from stage 1 (warm_start is the loop's retrain)
    assert searched == set(search.SEARCHED) | {"eval_every", "keep", "labels"} | {"group_by_length", "warm_start"}
    with pytest.raises(ParamsError, match="search.lr"):
        search.check_ranges(dataclasses.replace(Params().search, lr=(1e-3, 1e-5)))


@pytest.mark.parametrize("key, value, gap", [("stage2.x0", 3.0, "d/2 = 0.5"), ("stage1.x0", 0.6, "NLI labels 0/1/2"),
                                             ("stage1.encoder.x0", 0.75, "d/2 = 0.5")])
def test_a_buffer_wider_than_half_the_label_gap_is_refused_with_the_papers_reason(tmp_path, key, value, gap):
    """x0 <= d/2 (the paper's condition): stage2.x0 3.0 used to train with loss 0.0 and exit 0."""
    import yaml

    from stsreg.infra.config import load_params
    from stsreg.infra.errors import ParamsError

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    node = raw
    *path, last = key.split(".")
    for name in path:
        node = node[name]
    node[last] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError, match=rf"{key}: {value:g} exceeds .*{gap}.*x0 <= d/2"):
        load_params(tmp_path / "params.yaml")
    node[last] = 0.5  # the bound itself holds
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    load_params(tmp_path / "params.yaml")


def test_the_serving_backends_are_written_once_and_the_exports_match_them():
    """`serve.backend`, `stsreg serve --backend` and `stsreg encode --backend` take the declared backends (and auto);
    registration exports a file for each one but torch."""
    from stsreg.cli import build_parser
    from stsreg.infra.settings_operations import SERVING_BACKENDS
    from stsreg.product.serving import export

    assert export.BACKENDS == SERVING_BACKENDS
    parser = build_parser()
    for argv in (["serve"], ["encode", "x.txt", "--out", "y.npy"]):
        with pytest.raises(SystemExit):
            parser.parse_args([*argv, "--backend", "tpu"])
        assert parser.parse_args([*argv, "--backend", SERVING_BACKENDS[-1]]).backend == SERVING_BACKENDS[-1]
    from stsreg.infra.config import parse_params

    with pytest.raises(ParamsError, match=r"serve.backend: expected one of auto, torch, onnx, onnx-int8"):
        parse_params({"serve": {"backend": "tpu"}})
