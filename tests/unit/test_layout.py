"""The code base's own rules: docs name paths that exist, tests share helpers through tests/helpers only, the
evaluation's metric keys are pinned, and the library stays free of scripts."""

import ast
import re

import yaml

from tests.conftest import REPO

#: Source paths a docstring or a dvc.yaml comment may name (outputs of a run are not checked: they exist after it).
_PATH = re.compile(r"(?<![\w/.-])((?:src|pipelines|tests|docs|benchmarks)/[\w./-]*[\w/])")


def _docstrings(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return [ast.get_docstring(n) or "" for n in nodes]


def _py_files(folders=("src", "pipelines", "benchmarks")):
    """Every Python file under ``folders`` (relative to the repository), in sorted order per folder."""
    for folder in folders:
        yield from sorted((REPO / folder).rglob("*.py"))


def test_every_source_path_named_in_docstrings_and_dvc_comments_exists():
    texts = []
    for path in _py_files():
        texts += [(str(path.relative_to(REPO)), d) for d in _docstrings(path)]
    texts += [("dvc.yaml", line.split("#", 1)[1]) for line in (REPO / "dvc.yaml").read_text().splitlines()
              if "#" in line]
    missing = sorted({(where, p) for where, text in texts for p in _PATH.findall(text) if not (REPO / p).exists()})
    assert not missing, f"docs name paths that do not exist: {missing}"


def test_test_modules_share_code_only_through_helpers():
    offenders = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and re.match(r"tests\.(unit|flows|integration)\b",
                                                                             node.module):
                offenders.append(f"{path.relative_to(REPO)} imports {node.module}")
    assert not offenders, offenders


def test_the_library_ships_no_benchmark_script():
    assert not (REPO / "src/stsreg/bench.py").exists() and (REPO / "benchmarks/bench.py").exists()
    assert "python -m benchmarks.bench" in (REPO / "Makefile").read_text()


def test_dvc_metrics_files_are_headlines():
    """`dvc metrics show` stays readable: every metrics file of dvc.yaml is a flat dict of at most 16 numbers."""
    import json

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    files = [(next(iter(m)) if isinstance(m, dict) else m).replace("${item}", str(item))  # foreach: one per item
             for s in stages.values() for item in s.get("foreach", [""]) for m in s.get("do", s).get("metrics", [])]
    assert "reports/compare_backbones/all-mpnet-base-v2/metrics.json" in files
    assert "metrics/eval.json" in files and "reports/eval/metrics.json" not in files
    for name in files:
        path = REPO / name
        if path.exists():  # written by the stage (committed in the repository)
            data = json.loads(path.read_text())
            numbers = [v for v in data.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            assert len(numbers) <= 16 and not any(isinstance(v, (dict, list)) for v in data.values()), name


#: The wings of the tree and what each may import (besides itself): infrastructure nothing of the project, the
#: product infrastructure, the experiments both. The CLI (``cli.py``, the ``commands`` package) dispatches to every
#: wing.
WINGS = {
    "infra": (("src/stsreg/infra",), ("stsreg.infra",)),
    "product": (("src/stsreg/product", "pipelines/product"), ("stsreg.infra", "stsreg.product", "pipelines.product")),
    "experiments": (("src/stsreg/experiments", "pipelines/experiments"),
                    ("stsreg.infra", "stsreg.product", "pipelines.product", "stsreg.experiments",
                     "pipelines.experiments")),
}


def test_each_wing_imports_only_what_it_may():
    """No product module imports the experiments and infrastructure imports neither wing: the product pipeline
    (data -> stage 1 -> stage 2 -> evaluation -> release) ships and runs without the paper's experiments."""
    from stsreg.infra import codehash

    wrong = []
    for wing, (folders, allowed) in WINGS.items():
        assert all((REPO / folder).is_dir() for folder in folders), folders
        for path in _py_files(folders):
            bad = sorted({m for m in codehash._imports(path)
                          if not m.startswith(allowed) and m not in ("stsreg", "pipelines")})  # a root: docstring only
            if bad:
                wrong.append(f"{path.relative_to(REPO)} ({wing}) imports {bad}")
    assert not wrong, wrong
    top = {p.name for p in (REPO / "src/stsreg").glob("*.py")}
    # the command layer (cli and its commands_*.py) sits on top; every other module lives in a wing
    assert {t for t in top if not t.startswith("commands")} == {"__init__.py", "cli.py"}, top
    assert {p.name for p in (REPO / "pipelines").glob("*.py")} == {"__init__.py"}


def test_no_two_modules_share_a_name():
    names: dict[str, list[str]] = {}
    for path in _py_files():
        if path.name != "__init__.py":
            names.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    assert not {n: p for n, p in names.items() if len(p) > 1}


def test_no_module_edits_sys_path_and_no_script_lives_under_reports():
    """The explorations are importable as ``stsreg.experiments.explore.<name>``: nothing edits ``sys.path``."""
    path_edits = [str(p.relative_to(REPO)) for p in _py_files(("src", "pipelines"))
                  if re.search(r"\bsys\.path\b", p.read_text(encoding="utf-8"))]
    assert not path_edits, path_edits
    assert not sorted((REPO / "reports").rglob("*.py"))
    explore = REPO / "src/stsreg/experiments/explore"
    assert {p.stem for p in explore.glob("*.py")} >= {"cos_scale", "soup", "subset_breakdown"}


def test_one_direction_nothing_below_the_command_layer_imports_the_flows():
    """cli / commands -> pipelines (flows) -> product / experiments -> infra: a module of stsreg's product, experiments
    or infra that imported a flow would make the layers a circle (the torchrun relaunch and the backbone search enter
    their flows from the command layer)."""
    from stsreg.infra import codehash

    below = [p for layer in ("product", "experiments", "infra") for p in (REPO / "src/stsreg" / layer).rglob("*.py")]
    upward = {str(p.relative_to(REPO)): [m for m in codehash._imports(p) if m.split(".")[0] == "pipelines"]
              for p in below}
    assert not {k: v for k, v in upward.items() if v}


def test_no_two_modules_import_each_other_even_lazily():
    """No circle in the import graph of stsreg and pipelines, imports inside functions included: a circle means two
    modules own one concept between them (serve and served shared the model URI's resolution until model_uri.py)."""
    import graphlib

    from stsreg.infra import codehash

    modules = {}
    for path in _py_files(("src/stsreg", "pipelines")):
        parts = path.relative_to(REPO / ("src" if path.is_relative_to(REPO / "src") else "")).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {name: {m for m in codehash._imports(path) if m in modules and m != name} for name, path in modules.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as circle:
        raise AssertionError(f"import circle: {' -> '.join(circle.args[1])}") from None


def test_no_mlflow_store_is_committed_outside_mlflow():
    """The project's MLflow store is mlflow/mlflow.db (not committed); a store anywhere else in git is a stray one
    that a command or test without the project's tracking URI wrote, and every clone would start with it."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    stray = [f for f in tracked.splitlines() if (f.endswith((".db", ".sqlite")) or f.split("/")[0] == "mlruns")
             and not f.startswith("mlflow/")]
    assert not stray, stray
