"""dvc.yaml lists exactly the code each stage runs, and resumable runs are keyed by that code."""

import os

import yaml

from stsreg.experiments import backbone_compare, backbone_search
from stsreg.infra import codehash
from tests.conftest import REPO

#: a ``foreach`` stage's deps are those of its ``do`` (one stage per item, the same code)
STAGES = {
    name: stage.get("do", stage) for name, stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items()
}
ENTRIES = {**codehash.STAGE_ENTRIES, backbone_compare.DVC_STAGE: backbone_compare.STAGE_ENTRIES,
           backbone_search.DVC_STAGE: backbone_search.STAGE_ENTRIES}


def _code_deps(stage: str) -> set[str]:
    return {d for d in STAGES[stage]["deps"] if d.startswith(("src/", "pipelines/"))}


def test_every_stage_has_declared_entry_modules():
    assert set(STAGES) == set(ENTRIES)


def test_dvc_deps_equal_each_stages_import_closure():
    for stage, entries in ENTRIES.items():
        closure = {os.path.relpath(p, REPO) for p in codehash.import_closure(entries)}
        assert _code_deps(stage) == closure, (
            f"dvc.yaml stage {stage}: missing {sorted(closure - _code_deps(stage))}, "
            f"not run by the stage {sorted(_code_deps(stage) - closure)}; `python scripts/sync_dvc_deps.py` writes them"
        )


def test_closures_stay_narrow_so_a_change_reruns_only_what_it_can_change():
    # the stage-2 objective and loop: not in the deps of stage 1, the evaluation, the NLI table or the baselines
    for module in ("src/stsreg/product/objective.py", "src/stsreg/product/training/stage2_training.py"):
        assert {s for s in STAGES if module in _code_deps(s)} == {"stage2", "compare", "compare_backbone", "search",
                                                                  "search_backbone"}, module
    # the evaluation stages run no training code; the baselines do not run the comparison's
    for stage in ("evaluate", "register", "promote"):
        assert not {d for d in _code_deps(stage) if "training/" in d or d.endswith(("losses.py", "stage2_runner.py"))}
    assert "src/stsreg/experiments/compare.py" not in _code_deps("baselines") | _code_deps("nli_table")


def test_the_closure_follows_imports_inside_functions():
    # the CLI and flows import lazily: cli -> (inside _cmd_prepare) stsreg.product.data.prepare -> readers
    names = {os.path.relpath(p, REPO) for p in codehash.import_closure(["stsreg.cli"])}
    assert {"src/stsreg/product/data/readers.py", "pipelines/experiments/compare_flow.py",
            "src/stsreg/infra/errors.py"} <= names


def test_code_hash_can_leave_a_module_out():
    full = codehash.code_hash(["stsreg.experiments.search"])
    assert codehash.code_hash(["stsreg.experiments.search"], exclude=["stsreg.infra.atomic"]) != full
    assert codehash.code_hash(["stsreg.experiments.search"], exclude=["stsreg.not_a_module"]) == full


def test_the_settings_are_in_no_code_key():
    """Every settings module (params.yaml's sections, their types and validation) and the key machinery are left out of
    every run key, whatever a call site excludes: a new section or validation rule retrains no experiment row. A new
    ``infra/settings_*.py`` must join :data:`codehash.KEYLESS`."""
    settings = {f"stsreg.infra.{p.stem}" for p in (REPO / "src/stsreg/infra").glob("settings_*.py")}
    assert settings and settings | {"stsreg.infra.config", "stsreg.infra.knobs", "stsreg.infra.method_specs",
                            "stsreg.infra.codehash"} == set(codehash.KEYLESS)
    full = codehash.code_hash(["stsreg.experiments.search"])
    assert codehash.code_hash(["stsreg.experiments.search"], exclude=["stsreg.infra.config"]) == full
    closure = {str(p) for p in codehash.import_closure(["stsreg.experiments.search"])}
    assert any(c.endswith("infra/knobs.py") for c in closure)  # in the closure (dvc.yaml deps), not in the key


def test_compare_runs_are_keyed_by_their_code(monkeypatch):
    from stsreg.experiments import compare
    from stsreg.infra.config import Params

    # config.py (defaults, validation) is in no key (codehash.KEYLESS): the resolved values are, so a new params
    # section reruns nothing
    assert codehash.code_hash(compare.RUN_CODE) == codehash.code_hash(compare.RUN_CODE, exclude=["stsreg.infra.config"])
    before = compare.run_key(Params(), "ours", 42, "sts", "nli").fingerprint
    assert compare.run_key(Params(), "ours", 42, "sts", "nli").fingerprint == before
    monkeypatch.setattr(codehash, "code_hash", lambda roots: "edited")
    assert compare.run_key(Params(), "ours", 42, "sts", "nli").fingerprint != before


def test_code_hash_changes_with_a_module_of_the_closure(tmp_path, monkeypatch):
    pkg = tmp_path / "pipelines"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pipelines import b\n")
    (pkg / "b.py").write_text("X = 1\n")
    monkeypatch.setattr(codehash, "_package_dir", lambda name: pkg if name == "pipelines" else REPO / "src" / name)
    codehash._imports.cache_clear()
    h1 = codehash.code_hash(["pipelines.a"])
    (pkg / "b.py").write_text("X = 2\n")
    codehash._imports.cache_clear()
    assert codehash.code_hash(["pipelines.a"]) != h1


def test_with_an_encoder_step_every_trained_comparison_row_starts_from_stage_1():
    import dataclasses

    from stsreg.experiments import compare
    from stsreg.infra.config import Params, Stage1EncoderParams

    default = Params()
    plain = dataclasses.replace(default, stage1=dataclasses.replace(default.stage1,
                                                                    encoder=Stage1EncoderParams(objective="none")))
    stepped = dataclasses.replace(plain, stage1=dataclasses.replace(plain.stage1,
                                                                    encoder=Stage1EncoderParams(objective="simcse_sup")))
    assert [m for m in compare.METHODS if compare.METHODS[m]
            and compare.starts_from_stage1(plain, m)] == list(compare.REGRESSION)
    assert all(compare.starts_from_stage1(stepped, m) for m in compare.METHODS if compare.METHODS[m])
    # the rows that then start from the stage-1 encoder are keyed by stage 1 and the NLI data too
    assert compare.run_key(plain, "cosent", 42, "sts", "nli") == compare.run_key(plain, "cosent", 42, "sts", "other")
    assert compare.run_key(stepped, "cosent", 42, "sts", "nli") != compare.run_key(stepped, "cosent", 42, "sts",
                                                                                   "other")


def test_code_keys_do_not_depend_on_where_modules_live(tmp_path):
    """A move rewrites imports (``from stsreg import atomic`` -> ``from stsreg.infra import atomic``): the run keys of
    resumable experiments must not change with it, while any change to what the code does must change them."""
    flat, deep = tmp_path / "flat.py", tmp_path / "wing" / "moved.py"
    flat.write_text("from stsreg import atomic\nfrom stsreg.config import Params  # its old home\n\n"
                    "def f(p: Params):\n    return atomic.write(p)\n")
    deep.parent.mkdir()
    deep.write_text("from stsreg.infra import atomic\nfrom stsreg.infra.config import (\n    Params,\n)\n\n\n"
                    "def f(p: Params):\n    return atomic.write(p)  # reformatted, commented\n")
    assert codehash.source_key(flat) == codehash.source_key(deep)
    deep.write_text(deep.read_text().replace("atomic.write(p)", "atomic.write(p, 1)"))
    assert codehash.source_key(flat) != codehash.source_key(deep)
    # a third-party import keeps its module: `mean` from numpy is not `mean` from statistics
    numpy_mean, stats_mean = tmp_path / "a.py", tmp_path / "b.py"
    numpy_mean.write_text("from numpy import mean\n")
    stats_mean.write_text("from statistics import mean\n")
    assert codehash.source_key(numpy_mean) != codehash.source_key(stats_mean)


def test_the_backbone_comparison_stage_runs_every_declared_backbone_and_feeds_the_claims():
    raw = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert raw[backbone_compare.DVC_STAGE]["foreach"] == list(backbone_compare.SETTINGS)
    assert raw[backbone_search.DVC_STAGE]["foreach"] == list(backbone_search.SETTINGS)
    for name in backbone_compare.SETTINGS:
        folder = backbone_compare.folder(name).as_posix()
        assert {f"{folder}/{f}" for f in ("params.yaml", "results.csv", "paired.csv")} <= set(raw["claims"]["deps"])


def test_the_sync_script_rewrites_a_stage_to_its_closure_and_keeps_the_rest():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_dvc_deps", REPO / "scripts/sync_dvc_deps.py")
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    lines = (REPO / "dvc.yaml").read_text().split("\n")
    wanted = sync.closures()
    assert sync.synced(lines, wanted) == (lines, [])  # dvc.yaml as committed is in sync
    # one dep dropped and one foreign module added: the stage is rewritten, every other line kept
    broken = [line for line in lines if line.strip() != "- src/stsreg/infra/scales.py"]
    at = broken.index("      - src/stsreg/product/data/prepare.py")
    broken.insert(at, "      - src/stsreg/product/serving/app.py")
    fixed, changes = sync.synced(broken, wanted)
    assert fixed == lines and any(c.startswith("prepare: +['src/stsreg/infra/scales.py'] "
                                               "-['src/stsreg/product/serving/app.py']") for c in changes)
