"""Stage 1: one encoder pass however many epochs, a warm cache costs no encoder pass, the head learns."""

import torch

from stsreg.infra.config import Stage1Params
from stsreg.product.model import SiameseRegressor
from stsreg.product.training.stage1_training import train_head
from tests.helpers.nli import tiny_nli





def test_one_encoder_pass_cache_and_learning(tiny_backbone, tmp_path):
    torch.manual_seed(0)
    # fp32: `auto` would add its two small probe passes (tests/unit/test_precision.py) to the count below
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16, precision="fp32")
    calls = []
    model.encoder.register_forward_hook(lambda *a: calls.append(1))
    nli = tiny_nli(300)
    distinct = len(set(nli.premise) | set(nli.hypothesis))
    p = Stage1Params(epochs=3, batch_size=16, lr=1e-2, encode_batch_size=32)
    before = model.encoder.state_dict()["embeddings.word_embeddings.weight"].clone()
    logged = []
    log = lambda key, value, step: logged.append((key, value)) if key == "embedding_cache_hit" else None
    first = train_head(model, nli, p, seed=0, cache_dir=tmp_path / "cache", log_metric=log)
    assert len(calls) == -(-distinct // 32)          # one pass over the distinct sentences, not one per epoch
    assert logged == [("embedding_cache_hit", 0.0)] and first["steps"] == 3 * -(-300 // 16)
    assert "cache_hit" not in first                  # a fact of the run (its MLflow metric), not of the model
    assert torch.equal(before, model.encoder.state_dict()["embeddings.word_embeddings.weight"])  # encoder frozen
    calls.clear()
    second = train_head(model, nli, p, seed=0, cache_dir=tmp_path / "cache", log_metric=log)
    assert logged[-1] == ("embedding_cache_hit", 1.0) and calls == []       # warm cache: no encoder pass at all
    assert second["head_rounded_accuracy"] > 0.34    # better than one class out of three


def test_the_optional_encoder_step_trains_the_encoder_on_nli_then_the_head(tiny_backbone, tmp_path):
    import dataclasses

    from stsreg.infra.config import Params, Stage1EncoderParams
    from stsreg.product.model import weights_fingerprint
    from stsreg.product.runners.stage1_runner import run_stage1
    from tests.helpers.nli import grouped_nli

    grouped_nli(8).to_parquet(tmp_path / "nli.parquet")   # 24 pairs, 8 (premise, entailment, contradiction) triples
    base = Params()
    base = dataclasses.replace(base, model=dataclasses.replace(base.model, backbone=tiny_backbone, max_length=16,
                                                               precision="fp32"),
                               stage1=dataclasses.replace(base.stage1, encoder=Stage1EncoderParams(objective="none")))
    backbone = weights_fingerprint(SiameseRegressor.from_pretrained(tiny_backbone).encoder)

    frozen = run_stage1(base, tmp_path / "nli.parquet", tmp_path / "frozen", tmp_path / "cache",
                        ckpt_dir=tmp_path / "ck")
    assert "encoder" not in frozen and frozen["config"]["encoder"]["objective"] == "none"
    assert weights_fingerprint(SiameseRegressor.load(tmp_path / "frozen").encoder) == backbone  # the paper's stage 1

    step = Stage1EncoderParams(objective="simcse_sup", batch_size=4, lr=1e-3)
    params = dataclasses.replace(base, stage1=dataclasses.replace(base.stage1, encoder=step))
    summary = run_stage1(params, tmp_path / "nli.parquet", tmp_path / "s1", tmp_path / "cache",
                         ckpt_dir=tmp_path / "ck")
    assert summary["encoder"]["objective"] == "simcse_sup" and summary["encoder"]["examples"] == 8
    assert summary["encoder"]["steps"] == 2 and summary["steps"] > 0          # 8 triples / batch 4, then the head
    trained = SiameseRegressor.load(tmp_path / "s1")
    assert weights_fingerprint(trained.encoder) != backbone
    assert not list((tmp_path / "ck").glob("*.pt"))                             # the finished step's checkpoint is gone
    assert not torch.equal(trained.head.weight, SiameseRegressor.load(tmp_path / "frozen").head.weight)
