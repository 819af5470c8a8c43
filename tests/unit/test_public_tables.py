"""The public tables are declared once (stsreg.infra.public_tables.PUBLIC): one entry added there is a table that
params validation accepts as a reader, that prepare's default declares with its scale, that the mirror's readers
read, and that evaluation tables, model cards and the comparison's tables print by its display name."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

ADD_ONE = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from stsreg.infra import public_tables as pt
    toy = pt.PublicTable("toysts", "TOY-STS", pt.SplitFiles("read_stsb", {"test": "TOY/toy-test.csv"}),
                         scale=(0.0, 10.0), d=2.0)
    pt.PUBLIC = pt.PUBLIC + (toy,)
    vars(pt).update(pt.derive(pt.PUBLIC))  # before anything reads the registry
    from stsreg.infra.config import Params, parse_params
    from stsreg.product.data import catalogue
    from stsreg.product.sts_eval import format_table
    from stsreg.experiments.run_tables import format_compare
    from stsreg.product.model_card import _table
    import pandas as pd

    out = {}
    out["default_tables"] = [[t.name, list(t.scale), t.d] for t in Params().prepare.sts_tables]
    raw = {"prepare": {"sts_tables": [{"name": t.name, "reader": t.name, "scale": list(t.scale), "rescale": t.rescale,
                                       "d": t.d} for t in pt.PUBLIC]}}
    out["reader_accepted"] = parse_params(raw).prepare.sts_tables[-1].reader
    out["eval_tasks"] = list(catalogue.EVAL_TASKS)
    part = catalogue.sts_parts(("toysts",))[0]
    out["read"] = [part.dataset, part.split, len(part.read(Path(sys.argv[1])).rows)]
    keys = [*pt.AVG7, "avg7"]
    metrics = {f"{t}_{m}": 1.0 for t in keys for m in ("spearman", "unseen_spearman", "pearson", "prediction_spearman",
                                                       "prediction_mae", "pairs", "unseen_pairs")}
    out["eval_table"] = format_table(metrics)
    row = {"method": "ours", "seeds": 1, **{f"{t}_{v}": 1.0 for t in (*pt.AVG7, "avg7", "avg7_unseen")
                                              for v in ("mean", "std", "low", "high")}}
    out["compare_table"] = format_compare(pd.DataFrame([row]), None, [1]).split("\\n")[4]
    out["card"] = _table(Params(), "toysts")
    print(json.dumps(out))
''')


def test_one_entry_adds_a_public_table_everywhere(tmp_path):
    (tmp_path / "TOY").mkdir()
    (tmp_path / "TOY/toy-test.csv").write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tA man plays.\tA man "
                                               "plays music.\n")
    run = subprocess.run([sys.executable, "-c", ADD_ONE, str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["default_tables"][-1] == ["toysts", [0.0, 10.0], 2.0]
    assert out["reader_accepted"] == "toysts"
    assert out["eval_tasks"][-1] == "toysts"
    assert out["read"] == ["toysts", "test", 1]
    assert "| TOY-STS | 1.00" in out["eval_table"]
    assert "TOY-STS" in out["compare_table"]
    assert out["card"] == "TOY-STS"


def test_the_registry_is_the_only_list_of_public_tables():
    from stsreg.infra import config, public_tables
    from stsreg.product.data import catalogue

    assert config.PUBLIC_STS_TABLES == public_tables.NAMES == tuple(catalogue.READERS)
    assert catalogue.EVAL_TASKS == public_tables.AVG7 and catalogue.TRAIN_DATASETS == public_tables.TRAINED
    assert [(t.name, t.scale, t.rescale, t.d) for t in config.PUBLIC_TABLES] == [
        (t.name, t.scale, t.rescale, t.d) for t in public_tables.PUBLIC]
    # no other module spells the display names out
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "src").rglob("*.py")
                 if p.name != "public_tables.py" and any(s in p.read_text()
                                                         for s in ('"SICK-R"', '"STS12"', "'SICK-R'"))]
    assert offenders == []
