"""Your own scored pairs: every format reads the same rows, each refusal is one line naming the fix, hash splits are
stable as data grows, and a table on another scale trains the very weights of the same table pre-scaled to 0-5."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from stsreg.infra.config import StsTableColumns, StsTableSource
from stsreg.infra.errors import InputError
from stsreg.product.data import user_tables
from tests.conftest import tiny_sts


def _pairs(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """The user's own column names and a 0-1 scale (tiny_sts scores / 5)."""
    t = tiny_sts(n, seed)
    return pd.DataFrame({"query": t.sentence1, "answer": t.sentence2, "rating": t.score / 5})


def _write(df: pd.DataFrame, path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".tsv":
        df.to_csv(path, sep="\t", index=False)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in df.to_dict("records")))
    else:
        df.to_parquet(path, index=False)


def _table(file: str, scale=(0.0, 1.0), d=0.1, **columns) -> StsTableSource:
    cols = {"sentence1": "query", "sentence2": "answer", "score": "rating", **columns}
    return StsTableSource(name="mine", file=file, columns=StsTableColumns(**cols), scale=scale, d=d,
                          dev_fraction=0.15, test_fraction=0.15)


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_format_reads_the_same_rows_with_lines_and_the_0_5_scale(tmp_path, ext):
    df = _pairs()
    _write(df, tmp_path / f"data/tables/pairs{ext}")
    kept, rejects, counts = user_tables.read_table(_table(f"data/tables/pairs{ext}"), tmp_path)
    assert rejects.empty and counts["read"] == counts["kept"] == 200
    assert kept.score.tolist() == pytest.approx((df.rating * 5).tolist())  # 0-1 -> 0-5
    assert kept.sentence1.tolist() == df["query"].tolist()
    first = 2 if ext in (".csv", ".tsv") else 1  # a CSV's header is line 1
    assert kept.line.tolist() == list(range(first, first + 200))
    assert set(kept.split) == {"train", "dev", "test"} and counts["rows_test"] >= 10


def test_bad_rows_are_rejected_with_file_line_and_reason_and_counted(tmp_path):
    df = _pairs().astype(object)
    df.loc[3, "rating"], df.loc[5, "query"], df.loc[7, "rating"] = "high", "  ", 1.7
    _write(df, tmp_path / "data/tables/pairs.csv")
    kept, rejects, counts = user_tables.read_table(_table("data/tables/pairs.csv"), tmp_path)
    assert counts["rejected"] == 3 and counts["kept"] == 197
    assert rejects[["file", "line", "reason"]].values.tolist() == [
        ["data/tables/pairs.csv", 5, "score is not a number"],
        ["data/tables/pairs.csv", 7, "empty sentence after stripping whitespace"],
        ["data/tables/pairs.csv", 9, "score outside the declared scale [0, 1]"]]


@pytest.mark.parametrize("ext", [".parquet", ".jsonl", ".csv"])
def test_a_null_sentence_is_a_rejected_row_never_the_text_na(tmp_path, ext):
    """A Parquet null / pd.NA in a nullable string column, a JSON null, an empty CSV field: rejected with its line,
    never kept as "<NA>", "nan" or "None"."""
    df = _pairs()
    df["query"] = df["query"].astype("string")
    df["answer"] = df["answer"].astype("string")
    df.loc[3, "query"], df.loc[5, "answer"] = pd.NA, None
    _write(df, tmp_path / f"data/tables/pairs{ext}")
    kept, rejects, counts = user_tables.read_table(_table(f"data/tables/pairs{ext}"), tmp_path)
    assert counts["rejected"] == 2 and counts["kept"] == 198
    assert not kept[["sentence1", "sentence2"]].isin(["<NA>", "nan", "None", "NaN"]).any().any()
    reason = ("empty sentence after stripping whitespace" if ext == ".csv"  # CSV has no null: an empty field
              else user_tables.MISSING)
    assert rejects[["line", "reason"]].values.tolist() == [[5 if ext == ".csv" else 4, reason],
                                                           [7 if ext == ".csv" else 6, reason]]


@pytest.mark.parametrize("change, table, message", [
    (lambda d: d.rename(columns={"rating": "label"}), {}, r"no column 'rating' \(score\); the file has \['query', "
                                                          r"'answer', 'label'\]"),
    (lambda d: d.assign(rating=d.rating * 100), {}, r"lie outside the declared scale \[0, 1\]; the scores run 0..100, "
                                                    r"which looks like a 0-100 scale"),
    (lambda d: d.head(30), {}, r"the (dev|test) split has \d pairs \(at least 10"),
    (lambda d: d.assign(rating=0.5), {}, r"every (dev|test) pair scores 2.5: Spearman is undefined"),
    (lambda d: pd.concat([d.assign(part="train"), d.head(12).assign(part="test"), d.iloc[20:32].assign(part="dev")]),
     {"split": "part"}, r"12 pair\(s\) sit in both the train and the test split"),
])
def test_a_table_that_cannot_be_used_is_refused_in_one_line(tmp_path, change, table, message):
    _write(change(_pairs()), tmp_path / "data/tables/pairs.csv")
    with pytest.raises(InputError, match=message) as err:
        user_tables.read_table(_table("data/tables/pairs.csv", **table), tmp_path)
    assert "\n" not in str(err.value)


def test_appended_and_reordered_rows_never_move_a_pair_to_another_split(tmp_path):
    _write(_pairs(200), tmp_path / "data/tables/pairs.csv")
    before, _, _ = user_tables.read_table(_table("data/tables/pairs.csv"), tmp_path)
    grown = pd.concat([_pairs(300, seed=5), _pairs(200)]).sample(frac=1.0, random_state=1)  # new rows, new order
    _write(grown, tmp_path / "data/tables/pairs.csv")
    after, _, _ = user_tables.read_table(_table("data/tables/pairs.csv"), tmp_path)
    key = ["sentence1", "sentence2"]
    joined = before[key + ["split"]].merge(after[key + ["split"]].drop_duplicates(key), on=key, suffixes=("", "_now"))
    assert len(joined) == len(before.drop_duplicates(key)) and (joined.split == joined.split_now).all()


def test_prepare_refuses_a_bad_table_and_writes_nothing(tmp_path, own_project, capsys):
    """Through the command: exit 2, one line, no prepared table touched."""
    import shutil

    import yaml

    import stsreg.cli
    from tests.conftest import FIXTURE_RAW, REPO, fixture_registry

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["fetch"]["mirror"] = str(FIXTURE_RAW)
    raw["prepare"].update(max_rejected_fraction=1.0, nli_train=["snli/dev"], sts_tables=raw["prepare"]["sts_tables"] + [
        {"name": "mine", "file": "data/tables/pairs.csv", "columns": {"sentence1": "query", "sentence2": "answer",
                                                                    "score": "rating"}, "scale": [0, 1], "d": 0.1}])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    _write(_pairs().rename(columns={"rating": "stars"}), tmp_path / "data/tables/pairs.csv")
    shutil.copytree(FIXTURE_RAW, tmp_path / "data/raw")
    registry = fixture_registry(tmp_path / "data/sources.json")
    code = stsreg.cli.main(["prepare", "--registry", str(registry)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no column 'rating' (score)" in err and "'stars'" in err
    assert not (tmp_path / "data/prepared").exists() and not (tmp_path / "metrics").exists()
    _write(_pairs(), tmp_path / "data/tables/pairs.csv")  # fixed: prepared beside the public tables, on 0-5
    assert stsreg.cli.main(["prepare", "--registry", str(registry)]) == 0
    sts = pd.read_parquet(tmp_path / "data/prepared/sts.parquet")
    mine = sts[sts.dataset == "mine"]
    assert len(mine) == 200 and mine.score.max() <= 5.0 and set(mine.split) == {"train", "dev", "test"}
    summary = json.loads((tmp_path / "data/prepared/summary.json").read_text())
    assert summary["datasets"]["mine"]["scale"] == [0, 1] and len(summary["datasets"]["mine"]["sha256"]) == 64
    assert "mine" in summary["leakage"]  # its test pairs are checked against every training table


def test_another_scale_trains_the_same_weights_as_the_table_pre_scaled_to_0_5(tmp_path, tiny_backbone):
    from stsreg.infra.config import Stage2Params
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.runners.stage2_runner import stage2_data
    from tests.helpers.training import fine_tune_params as fine_tune
    from tests.helpers.weights import weights

    df = _pairs(160)
    _write(df, tmp_path / "data/tables/a.csv")
    _write(df.assign(rating=df.rating * 5), tmp_path / "data/tables/b.csv")
    trained = []
    for file, scale, d in (("data/tables/a.csv", (0.0, 1.0), 0.1), ("data/tables/b.csv", (0.0, 5.0), 0.5)):
        kept, _, _ = user_tables.read_table(_table(file, scale=scale, d=d), tmp_path)
        kept.to_parquet(tmp_path / "sts.parquet")
        train, dev = stage2_data(tmp_path / "sts.parquet", ("mine",), "mine")
        torch.manual_seed(0)
        model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16, precision="fp32")
        fine_tune(model, train, dev, Stage2Params(batch_size=8, epochs=1, eval_every=50, checkpoint_every_s=3600,
                                                  lr=1e-3, loss="smooth_k2_cos", x0=0.2),
                  seed=3, out_dir=tmp_path / f"out-{file[-5]}", ckpt_dir=tmp_path / f"ck-{file[-5]}",
                  device=torch.device("cpu"))
        trained.append(weights(tmp_path / f"out-{file[-5]}"))
    for name, tensor in trained[0].items():
        assert torch.allclose(tensor, trained[1][name], atol=1e-6), name


def test_the_public_tables_are_declared_entries_like_yours():
    """params.yaml lists the 7 public tables in prepare.sts_tables (reader, scale, d), the knob's default too; one
    left out is refused (avg7 is their mean), a public reader under another name too, and stage 2's buffer is
    checked against each table's own d."""
    from stsreg.infra.config import PUBLIC_STS_TABLES, PUBLIC_TABLES, ParamsError, load_params, parse_params
    from tests.conftest import REPO

    declared = load_params(REPO / "params.yaml").prepare.sts_tables
    assert declared == PUBLIC_TABLES and [t.reader for t in declared] == list(PUBLIC_STS_TABLES)
    sickr = declared[-1]
    assert sickr.scale == (1.0, 5.0) and not sickr.rescale and sickr.internal_gap() == 1.0
    entries = [{"name": t.name, "reader": t.reader, "scale": list(t.scale), "d": t.d, "rescale": t.rescale}
               for t in PUBLIC_TABLES]
    with pytest.raises(ParamsError, match=r"public table\(s\) \['sts13'\] are not declared; avg7 is the mean"):
        parse_params({"prepare": {"sts_tables": [e for e in entries if e["name"] != "sts13"]}})
    renamed = [{**e, "name": "benchmark"} if e["name"] == "stsb" else e for e in entries]
    with pytest.raises(ParamsError, match=r"keeps its reader's name \('stsb'\)"):
        parse_params({"prepare": {"sts_tables": renamed}})
    # a public table's scale, d and rescale are facts of its data: changing one is refused, naming the facts
    for change in ({"d": 0.5}, {"scale": [0, 100]}, {"rescale": False}):
        edited = [{**e, **change} if e["name"] == "stsb" else e for e in entries]
        with pytest.raises(ParamsError, match=r"prepare.sts_tables\[stsb\]: scale, d and rescale are facts of the "
                                              r"public data \(\[0.0, 5.0\], d 1, rescale true\)"):
            parse_params({"prepare": {"sts_tables": edited}})
    # stage 2's buffer is checked against the d of each table it trains on (here a table of yours with d 0.5)
    mine = {"name": "mine", "file": "data/tables/mine.csv", "scale": [0, 5], "d": 0.5}
    with pytest.raises(ParamsError, match=r"stage2.x0: 0.3 exceeds d/2 = 0.25 for table mine"):
        parse_params({"prepare": {"sts_tables": [*entries, mine]}, "stage2": {"x0": 0.3, "train_tables": ["mine"]}})
    assert parse_params({"prepare": {"sts_tables": [*entries, mine]}, "stage2": {"x0": 0.3, "train_tables": ["sickr"]}})


def test_prepare_keeps_the_public_tables_on_their_own_scales(tmp_path, own_project):
    """No score range is wired to a dataset name in the readers: the declared facts put STS-B on 0-5 and keep SICK-R's
    1-5 as annotated (rescale: false); the summary records each table's scale and reader."""
    import shutil

    import yaml

    import stsreg.cli
    from tests.conftest import FIXTURE_RAW, REPO, fixture_registry

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["fetch"]["mirror"] = str(FIXTURE_RAW)
    raw["prepare"].update(max_rejected_fraction=1.0, nli_train=["snli/dev"])
    shutil.copytree(FIXTURE_RAW, tmp_path / "data/raw")
    registry = fixture_registry(tmp_path / "data/sources.json")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    assert stsreg.cli.main(["prepare", "--registry", str(registry)]) == 0
    on_5 = pd.read_parquet(tmp_path / "data/prepared/sts.parquet")
    stsb, sick = on_5[on_5.dataset == "stsb"].score, on_5[on_5.dataset == "sickr"].score
    assert len(stsb) and stsb.min() >= 0.0 and stsb.max() <= 5.0
    assert sick.min() >= 1.0 and sick.max() <= 5.0
    summary = json.loads((tmp_path / "data/prepared/summary.json").read_text())
    assert summary["datasets"]["stsb"]["scale"] == [0, 5] and summary["datasets"]["sickr"]["reader"] == "sickr"


@pytest.mark.parametrize("scores,d,accepted", [
    ([i * 10 for i in range(11)], 10, True),          # a 0-100 grid in steps of 10: d 10 (0.5 on 0-5), x0 0.2 holds
    (list(range(101)), 20, True),                     # every integer 0-100: averaged/continuous, a fifth of the scale
    ([40 + i for i in range(19)] + [0, 100], 1, False),  # 21 values on a grid of 1: d 1 (0.05 on 0-5), x0 0.2 refused
])
def test_data_check_proposes_d_from_the_scores_and_judges_stage2_x0(tmp_path, monkeypatch, scores, d, accepted):
    """`data check` on a 0-100 file used to suggest `d: 1` and training on it, which stage 2 then refused."""
    import random

    from stsreg.product.data.check import TableToCheck, check

    monkeypatch.chdir(tmp_path)
    rng = random.Random(0)
    rows = [(f"first {i} {rng.random()}", f"second {i}", rng.choice(scores)) for i in range(400)]
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_csv("mine.csv", index=False)
    text = check(TableToCheck("mine.csv", "sentence1", "sentence2", "score"), x0=0.2)
    assert f"      d: {d:g}\n" in text and "scale: [0, 100]" in text
    assert ("stage2.x0 = 0.2 is accepted" in text) == accepted and ("would be REFUSED" in text) == (not accepted)
    assert ("then train on it (stage2.train_tables" in text) == accepted


def test_data_check_names_a_missing_file_without_claiming_it_is_declared(tmp_path, monkeypatch):
    from stsreg.infra.errors import InputError
    from stsreg.product.data.check import TableToCheck, check

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        check(TableToCheck("nope.csv", "sentence1", "sentence2", "score"))
    assert "nope.csv: no such file" in str(err.value) and "declared" not in str(err.value)


def test_data_check_refuses_flags_out_of_range_as_params_yaml_would(tmp_path, monkeypatch):
    """A table built from `data check`'s flags is checked by the same types as params.yaml's tables (it was never
    checked): a negative d or a dev share of 1.5 is an InputError naming the flag's key, not a traceback."""
    from stsreg.infra.errors import InputError
    from stsreg.product.data.check import TableToCheck, check

    monkeypatch.chdir(tmp_path)
    pd.DataFrame([("a b", "c d", 3.0), ("e f", "g h", 1.0)], columns=["sentence1", "sentence2", "score"]).to_csv(
        "mine.csv", index=False)
    with pytest.raises(InputError) as err:
        check(TableToCheck("mine.csv", "sentence1", "sentence2", "score", d=-1.0, dev_fraction=1.5))
    assert "stsreg data check: d: expected a value > 0, got -1.0" in str(err.value)
    assert "stsreg data check: dev_fraction: expected a value < 1, got 1.5" in str(err.value)
