""""Any Hugging Face backbone", tested: tiny models of architectures other than BERT (MPNet, all-mpnet-base-v2's; and
RoBERTa's byte-level BPE), neither of which makes ``token_type_ids``, go through stage 1 (the SimCSE encoder step and
the head), stage 2, the 7-task evaluation and the ONNX export, and their trained folders load in
sentence-transformers."""

import json
import math
import shutil

import pandas as pd
import pytest
import torch
import yaml

from tests.conftest import REPO, TINY_WORDS, tiny_eval_table, tiny_sts
from tests.helpers.backbones import tiny_backbone_of
from tests.helpers.nli import grouped_nli


@pytest.mark.parametrize("arch", ["mpnet", "roberta"])
def test_another_architecture_trains_evaluates_exports_and_loads(arch, harness, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    from pipelines.product.stage1_flow import stage1_flow
    from pipelines.product.stage2_flow import stage2_flow
    from stsreg.infra.config import load_params
    from stsreg.product.serving import export
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.runners.eval_runner import run_evaluate

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    backbone = tiny_backbone_of(arch, tmp_path / f"tiny-{arch}", list(TINY_WORDS))
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(backbone=backbone, max_length=16)
    raw["stage2"].update(batch_size=8, eval_every=5, checkpoint_every_s=0, epochs=1)
    raw["evaluate"].update(max_length=16, batch_size=32, n_resamples=50)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    grouped_nli(20).to_parquet(tmp_path / "nli.parquet")  # triples for the default SimCSE encoder step
    monkeypatch.chdir(tmp_path)
    sts = pd.concat([tiny_eval_table(per_task=24),
                     tiny_sts(48, seed=5).assign(dataset="stsb", split="train", subset="A", file="stsb/train.txt",
                                                 line=range(1, 49), seen_in_train=False)], ignore_index=True)
    sts.to_parquet(tmp_path / "sts.parquet")

    stage1_flow(params_path=str(tmp_path / "params.yaml"), nli_path=str(tmp_path / "nli.parquet"),
                out_dir=str(tmp_path / "m1"), cache_dir=str(tmp_path / "cache"))
    s2 = stage2_flow(params_path=str(tmp_path / "params.yaml"), sts_path=str(tmp_path / "sts.parquet"),
                     init_dir=str(tmp_path / "m1"), out_dir=str(tmp_path / "m2"), ckpt_dir=str(tmp_path / "ck"),
                     metrics_path=str(tmp_path / "stage2.json"))
    m2 = tmp_path / "m2"
    assert json.loads((m2 / "config.json").read_text())["model_type"] == arch
    assert s2["steps"] == 6 and math.isfinite(s2["best_dev_spearman"])
    # the encoder moved in both stages (the SimCSE step, then stage 2): not the backbone's weights
    base = SiameseRegressor.from_pretrained(backbone, max_length=16)
    trained = SiameseRegressor.load(m2)
    assert not torch.equal(base.encoder.embeddings.word_embeddings.weight,
                           trained.encoder.embeddings.word_embeddings.weight)

    metrics = run_evaluate(load_params(tmp_path / "params.yaml"), m2, tmp_path / "sts.parquet", tmp_path / "eval")
    assert math.isfinite(metrics["avg7_spearman"]) and math.isfinite(metrics["avg7_unseen_spearman"])
    assert len(pd.read_parquet(tmp_path / "eval/predictions.parquet")) == 8 * 24  # 7 test sets + STS-B dev

    # the trained folder is a sentence-transformers model with its card and cosine similarity; compared in fp32, as
    # sentence-transformers encodes (precision auto takes bf16 on a CPU with native bf16, ~1e-3 away)
    sentences = ["a man plays guitar", "the dog runs in the park on the sofa"]
    ours = SiameseRegressor.load(m2, precision="fp32").eval().encode(sentences, show_progress=False)
    theirs = SentenceTransformer(str(m2), device="cpu")
    assert theirs.similarity_fn_name == "cosine"
    assert torch.allclose(torch.from_numpy(theirs.encode(sentences)), ours, atol=1e-5)
    card = (m2 / "README.md").read_text()
    assert card.startswith(f"---\nbase_model: {backbone}\n") and "dev (step" in card

    # exported with torch's exporter: the ONNX graph gives torch's embeddings; int8 keeps their direction
    folder = tmp_path / "registered"
    shutil.copytree(m2, folder)
    files = export.export_all(folder)
    for backend, tol in (("onnx", 1e-4), ("onnx-int8", None)):
        assert files[backend].is_file()
        run = export.use_backend(SiameseRegressor.load(folder).eval(), backend, folder).encode(sentences,
                                                                                               show_progress=False)
        if tol:
            assert torch.allclose(run, ours, atol=tol)
        else:
            assert torch.nn.functional.cosine_similarity(run, ours).min() > 0.95


def test_the_comparison_on_another_backbone_has_its_own_folder_params_and_resumes(harness, tmp_path, monkeypatch):
    """`stsreg compare --backbone NAME` as the docs print it: the rows on that backbone, into its own folder with the
    params they ran with; the main comparison's folder untouched; a rerun trains nothing again."""
    from stsreg.cli import main
    from stsreg.experiments import backbone_compare

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow/mlflow.db")
    monkeypatch.chdir(tmp_path)
    backbone = tiny_backbone_of("mpnet", tmp_path / "tiny-mpnet", list(TINY_WORDS))
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["model"].update(max_length=16)
    raw["stage1"].update(epochs=1)
    raw["stage2"].update(batch_size=8, eval_every=100, checkpoint_every_s=3600, lr=1e-3)
    raw["evaluate"].update(max_length=16, n_resamples=50)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "data/prepared").mkdir(parents=True)
    train = tiny_sts(48, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(48),
                                        seen_in_train=False)
    pd.concat([tiny_eval_table(24), train], ignore_index=True).to_parquet(tmp_path / "data/prepared/sts.parquet")
    grouped_nli(14).to_parquet(tmp_path / "data/prepared/nli_train.parquet")

    argv = ["compare", "--backbone", backbone, "--set", "compare.methods=[base, cosent, ours]", "--set",
            "compare.seeds=[7]"]
    assert main(argv) == 0
    out = tmp_path / "reports/compare_backbones" / "tiny-mpnet"
    assert backbone_compare.folder(backbone) == out.relative_to(tmp_path)
    ran = yaml.safe_load((out / "params.yaml").read_text())
    assert ran["model"]["backbone"] == backbone and ran["compare"]["methods"] == ["base", "cosent", "ours"]
    assert list(pd.read_csv(out / "results.csv").method) == ["base", "cosent", "ours"]
    assert set(json.loads((out / "metrics.json").read_text())) >= {"base_avg7", "ours_avg7_unseen"}
    assert not (tmp_path / "reports/compare").exists()  # the main comparison is not touched
    markers = {p: p.stat().st_mtime_ns for p in (out / "rows").glob("*/run.json")}  # the rows travel in git
    assert len(markers) == 3
    assert main(argv) == 0  # resumed: every row found finished
    assert {p: p.stat().st_mtime_ns for p in (out / "rows").glob("*/run.json")} == markers
    # a packaged backbone's declared settings apply; a bad --set is refused before anything runs
    from stsreg.infra.config import load_params
    mp = backbone_compare.resolved(load_params(tmp_path / "params.yaml"), "all-mpnet-base-v2", {})
    assert mp.stage1.encoder.objective == "none" and list(mp.compare.methods) == [
        "base", "contrast", "cosent", "cosine_mse", "ours", "translated_relu", "mse", "ours_cos"]
    assert main(["compare", "--backbone", backbone, "--set", "compare.seeds"]) == 2
