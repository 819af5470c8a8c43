"""The baselines' components on hand-checked cases: word vectors (files, co-occurrences, the GloVe objective),
recurrent encoders, the fit loop (selection after step 0, resume to the same weights), LoRA and cross-encoders,
the study's STS-B view (Pearson interval, MSE on label / 5) and the catalogue."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from stsreg.experiments.baselines import experiment, metrics, recurrent, wordvec
from stsreg.experiments.baselines.fit import FitConfig, fit
from tests.conftest import tiny_sts


# -- word vectors -----------------------------------------------------------------------------------------------
def test_tokenize_lowercases_and_splits_punctuation():
    assert wordvec.tokenize("Don't STOP, now!") == ["don't", "stop", ",", "now", "!"]


@pytest.mark.parametrize("binary", [False, True])
def test_word2vec_format_file_loads_by_path(tmp_path, binary):
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(["dog", "cat", "car"], np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 0, 1]], dtype=np.float32))
    path = tmp_path / ("tiny.bin" if binary else "tiny.txt")
    kv.save_word2vec_format(str(path), binary=binary)
    vectors = wordvec.load_word2vec_format(path)
    assert vectors.words == ["dog", "cat", "car"] and vectors.dim == 3
    model = wordvec.AveragedWordVectors(vectors)
    # "dog cat" = mean([1,0,0], [.9,.1,0]); "car" = [0,0,1]; an unknown-only sentence is the zero vector
    scores = model.score(["dog", "dog cat", "zebra"], ["cat", "car", "dog"])
    assert scores[0] == pytest.approx(0.9 / math.sqrt(0.82), abs=1e-6)
    assert scores[1] == pytest.approx(0.0, abs=1e-7) and scores[2] == 0.0


def test_packaged_glove_is_stanfords_6b_50d():
    vectors = wordvec.load_glove_6b_50d()
    assert len(vectors.words) == 400_000 and vectors.dim == 50 and vectors.words[0] == "the"
    np.testing.assert_allclose(vectors.vectors[0][:3], [0.418, 0.24968, -0.41242], atol=1e-6)  # glove.6B.50d.txt line 1


def test_cooccurrences_count_each_pair_by_inverse_distance_within_sentences():
    vocab = {"a": 0, "b": 1, "c": 2}
    rows, cols, x = wordvec.cooccurrences([["a", "b", "c"], ["c", "a"]], vocab, window=2)
    got = {(int(i), int(j)): float(v) for i, j, v in zip(rows, cols, x)}
    # sentence 1: a-b at 1, b-c at 1, a-c at 2 (1/2); sentence 2: c-a at 1; never across sentences; symmetric
    assert got == {(0, 1): 1.0, (1, 0): 1.0, (1, 2): 1.0, (2, 1): 1.0, (0, 2): 1.5, (2, 0): 1.5}


def test_glove_loss_value_and_gradient_by_hand():
    w = torch.tensor([[1.0, 0.0], [0.0, 2.0]], requires_grad=True)
    wc = torch.tensor([[0.5, 0.5], [1.0, 1.0]], requires_grad=True)
    b = torch.tensor([0.1, 0.2], requires_grad=True)
    bc = torch.tensor([0.0, 0.3], requires_grad=True)
    rows, cols, x = torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([200.0, 10.0])
    loss = wordvec.glove_loss((w, wc, b, bc), rows, cols, x)
    # entry 1: f = 1 (x >= x_max), diff = 1 + 0.1 + 0.3 - log 200; entry 2: f = 0.1^0.75, diff = 1 + 0.2 + 0 - log 10
    d1, d2, f2 = 1.4 - math.log(200), 1.2 - math.log(10), 0.1 ** 0.75
    assert loss.item() == pytest.approx(d1 ** 2 + f2 * d2 ** 2, rel=1e-5)
    loss.backward()
    assert w.grad[0].tolist() == pytest.approx([2 * d1 * 1.0, 2 * d1 * 1.0], rel=1e-5)  # d/dw_0 = 2 f d1 wc_1
    assert bc.grad.tolist() == pytest.approx([2 * f2 * d2, 2 * d1], rel=1e-5)


def _topic_similarity(vectors, topics) -> tuple[float, float]:
    """Mean cosine of two words of the same topic, and of two words of different topics."""
    unit = {w: vectors.vectors[vectors.index[w]] / np.linalg.norm(vectors.vectors[vectors.index[w]]) for t in topics
            for w in t}
    within = np.mean([unit[a] @ unit[b] for t in topics for a in t for b in t if a != b])
    across = np.mean([unit[a] @ unit[b] for a in topics[0] for b in topics[1]])
    return float(within), float(across)


def _two_topics(words: int, sentences: int):
    """Sentences of 6 words drawn from one of two topics (word lists that never share a sentence)."""
    rng = np.random.default_rng(0)
    topics = ([f"p{i}" for i in range(words)], [f"c{i}" for i in range(words)])
    return [list(rng.choice(topics[i % 2], 6)) for i in range(sentences)], topics


def test_self_trained_glove_puts_cooccurring_words_together():
    corpus, topics = _two_topics(20, 600)
    within, across = _topic_similarity(wordvec.train_glove(corpus, wordvec.GloveConfig(8, 4, 30, 1), seed=0), topics)
    assert within > 0.9 and abs(across) < 0.2


@pytest.mark.parametrize("skipgram", [True, False])
def test_self_trained_word2vec_puts_cooccurring_words_together(skipgram):
    # 300 words: gensim's frequent-word downsampling would drop most tokens of a smaller vocabulary
    corpus, topics = _two_topics(150, 3000)
    within, across = _topic_similarity(wordvec.train_word2vec(corpus, skipgram, 8, 3, 10, 1, seed=0), topics)
    assert within > across + 0.5


# -- recurrent encoders ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cell,pooling,bi", [("rnn", "last", False), ("gru", "last", True), ("lstm", "max", True)])
def test_recurrent_embedding_ignores_padding(cell, pooling, bi):
    torch.manual_seed(0)
    enc = recurrent.RecurrentEncoder(cell, 6, vocab=["<pad>", "<unk>", "a", "dog", "runs", "fast"], dim=4,
                                     bidirectional=bi, pooling=pooling).eval()
    with torch.no_grad():
        alone = enc.encode(["a dog"])
        batched = enc.encode(["a dog runs fast fast fast", "a dog"])
    assert alone.shape == (1, 6 * (2 if bi else 1))
    torch.testing.assert_close(batched[1:], alone)  # the short sentence is not changed by the padding
    assert enc.ids(["zebra"])[0].tolist() == [[recurrent.UNK]]


def test_glove_embeddings_are_frozen_and_whole():
    glove = wordvec.WordVectors(["dog", "cat"], np.eye(2, dtype=np.float32), "toy")
    enc = recurrent.RecurrentEncoder("lstm", 3, glove=glove)
    assert not enc.embedding.weight.requires_grad and enc.embedding.weight.shape == (4, 2)
    assert enc.index["cat"] == 3 and enc.embedding.weight[3].tolist() == [0.0, 1.0]


def test_infersent_nli_pretraining_learns_and_resumes_to_the_same_weights(tmp_path):
    from tests.helpers.nli import grouped_nli

    nli = grouped_nli(24)
    vocab = recurrent.build_vocab([wordvec.tokenize(s) for s in set(nli.premise) | set(nli.hypothesis)])

    def run(ckpt, steps_before_crash=None):
        torch.manual_seed(0)
        enc = recurrent.RecurrentEncoder("lstm", 8, vocab=vocab, dim=8, bidirectional=True, pooling="max")

        def crash(key, value, step):
            if steps_before_crash and step == steps_before_crash:
                raise KeyboardInterrupt

        cfg = FitConfig(epochs=3, batch_size=8, lr=1e-2, max_grad_norm=5.0, checkpoint_every=3)
        summary = recurrent.pretrain_on_nli(enc, nli, cfg, 0, ckpt, log_metric=crash)
        return enc, summary

    full, summary = run(tmp_path / "a.pt")
    assert summary["nli_steps"] == 27 and summary["nli_train_accuracy_last_10pct"] > 0.5
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b.pt", steps_before_crash=7)  # the checkpoint holds step 6
    resumed, _ = run(tmp_path / "b.pt")
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)


# -- the fit loop --------------------------------------------------------------------------------------------------
def _toy(tmp_path, cfg, crash_at=None, ckpt="ck.pt"):
    torch.manual_seed(0)
    train, dev = tiny_sts(40, seed=1), tiny_sts(30, seed=2)
    vocab = recurrent.build_vocab([wordvec.tokenize(s) for s in list(train.sentence1) + list(train.sentence2)])
    model = recurrent.RecurrentEncoder("gru", 8, vocab=vocab, dim=8)

    def crash(key, value, step):
        if crash_at is not None and key == "train_loss" and step == crash_at:
            raise KeyboardInterrupt

    return model, fit(model, train, dev, cfg, 0, tmp_path / ckpt, crash)


def test_fit_keeps_the_best_dev_evaluation_after_step_0_and_learns(tmp_path):
    cfg = FitConfig(epochs=6, batch_size=8, lr=1e-2, warmup_ratio=0.0, eval_every=0, checkpoint_every=5)
    model, s = _toy(tmp_path, cfg)
    steps = [h["step"] for h in s["history"]]
    assert steps == [0, 5, 10, 15, 20, 25, 30] and s["steps"] == 30
    best = max(s["history"][1:], key=lambda h: h["dev_spearman"])
    assert (s["kept_step"], s["kept_dev_spearman"]) == (best["step"], best["dev_spearman"])
    assert s["kept_dev_spearman"] > s["start_dev_spearman"] + 20  # the topic structure is learnable
    # the model holds the kept weights: re-scoring dev gives the kept figure
    from stsreg.experiments.baselines.fit import dev_metrics

    assert dev_metrics(model, tiny_sts(30, seed=2), 64)[0] == pytest.approx(s["kept_dev_spearman"])


def test_fit_resumes_after_a_crash_to_the_same_weights(tmp_path):
    cfg = FitConfig(epochs=3, batch_size=8, lr=1e-2, warmup_ratio=0.2, eval_every=4, checkpoint_every=3)
    full, s_full = _toy(tmp_path, cfg, ckpt="a.pt")
    with pytest.raises(KeyboardInterrupt):
        _toy(tmp_path, cfg, crash_at=8, ckpt="b.pt")  # checkpoint at step 6
    resumed, s_res = _toy(tmp_path, cfg, ckpt="b.pt")
    assert s_res["history"] == s_full["history"]
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)


def test_length_grouped_epochs_cover_every_pair_once_and_resume_to_the_same_weights(tmp_path):
    from stsreg.product.training.checkpoint import Checkpoint, CheckpointPlan
    from stsreg.product.training.resumable import Batches, run_steps

    seen: list[list[int]] = []
    lengths = [i % 7 for i in range(45)]
    run_steps(Batches(45, 8, 2, 0, lengths), lambda idx, step: seen.append(idx),
              Checkpoint(CheckpointPlan(tmp_path / "g.pt", every_steps=100), {}, {}), "grouped")
    assert len(seen) == 2 * math.ceil(45 / 8)  # as many steps as random batches
    for epoch in (seen[:6], seen[6:]):
        assert sorted(i for b in epoch for i in b) == list(range(45))
    # a batch holds similar lengths: far less spread than random batches
    assert np.mean([np.ptp([lengths[i] for i in b]) for b in seen]) < 2.5
    cfg = FitConfig(epochs=3, batch_size=8, lr=1e-2, warmup_ratio=0.2, eval_every=4, checkpoint_every=3,
                    group_by_length=True)
    full, s_full = _toy(tmp_path, cfg, ckpt="a.pt")
    with pytest.raises(KeyboardInterrupt):
        _toy(tmp_path, cfg, crash_at=8, ckpt="b.pt")
    resumed, s_res = _toy(tmp_path, cfg, ckpt="b.pt")
    assert s_res["history"] == s_full["history"]
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)


# -- transformer systems -------------------------------------------------------------------------------------------
def test_transformer_systems_score_in_bf16_close_to_fp32_and_train_fp32_weights(tiny_backbone, tmp_path):
    from stsreg.experiments.baselines.encoders import CrossEncoder, TransformerBiEncoder, set_precision

    s1, s2 = ["a man plays", "a dog runs in the park", "the cat"], ["the dog runs", "a man plays", "a cat sits"]
    for build in (lambda: TransformerBiEncoder(tiny_backbone, "mean", max_length=16),
                  lambda: CrossEncoder(tiny_backbone, "mlp", 16)):
        torch.manual_seed(0)
        model = build().eval()
        set_precision(model, "fp32")
        assert model.amp_dtype is None and "bf16" not in model.runs_on
        ref = model.score(s1, s2)
        set_precision(model, "bf16")
        assert model.amp_dtype == torch.bfloat16 and model.runs_on.endswith("bf16 autocast")
        low = model.score(s1, s2)
        assert low.dtype == np.float64 and np.abs(low - ref).max() < 0.02  # bf16: ~3 significant digits
        assert not np.array_equal(low, ref)  # it did run in bf16
    # training under bf16 autocast: the weights stay fp32 and move
    torch.manual_seed(0)
    model = TransformerBiEncoder(tiny_backbone, "mean", max_length=16)
    set_precision(model, "bf16")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train = pd.DataFrame({"sentence1": s1 * 4, "sentence2": s2 * 4, "score": [1.0, 3.0, 4.5] * 4})
    fit(model, train, train, FitConfig(epochs=1, batch_size=4, lr=1e-3, group_by_length=True), 0, tmp_path / "c.pt")
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())


def test_token_lengths_of_bi_and_cross_encoders(tiny_backbone):
    from stsreg.experiments.baselines.encoders import CrossEncoder, TransformerBiEncoder

    s1, s2 = ["a man plays", "a dog"], ["the dog", "a man plays in the park"]
    # [CLS] ... [SEP]: the longer side; a pair read together: [CLS] s1 [SEP] s2 [SEP]
    assert TransformerBiEncoder(tiny_backbone, "mean", max_length=16).pair_lengths(s1, s2) == [5, 8]
    assert CrossEncoder(tiny_backbone, "linear", 16).pair_lengths(s1, s2) == [3 + 2 + 3, 2 + 6 + 3]
    assert CrossEncoder(tiny_backbone, "linear", 6).pair_lengths(s1, s2) == [6, 6]  # truncated to max_length


def test_lora_trains_only_adapters_and_the_projection(tiny_backbone):
    from stsreg.experiments.baselines.encoders import TransformerBiEncoder

    full = TransformerBiEncoder(tiny_backbone, "mean", "gelu", 12, 16)
    lora = TransformerBiEncoder(tiny_backbone, "mean", "gelu", 12, 16, lora={"r": 2, "alpha": 4})
    trained = {n for n, p in lora.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n or n.startswith("projection.") for n in trained)
    assert any("lora_" in n and "attention" in n for n in trained) and any("lora_" in n and "intermediate" in n
                                                                           for n in trained)
    assert lora.n_parameters()[0] < full.n_parameters()[0] / 4
    assert lora.encode(["a man plays"]).shape == (1, 12)


def test_cross_encoder_reads_the_pair_together_and_scores_0_to_1(tiny_backbone):
    from stsreg.experiments.baselines.encoders import CrossEncoder

    torch.manual_seed(0)
    for head in ("linear", "mlp"):
        model = CrossEncoder(tiny_backbone, head, 16).eval()
        scores = model.score(["a man plays", "a dog runs"], ["the dog runs", "a man plays"])
        assert ((scores > 0) & (scores < 1)).all()
        assert scores[0] != pytest.approx(scores[1], abs=1e-7)  # (a, b) and (b, a) are different inputs
        assert model.tokenizer(["a"], ["b"])["token_type_ids"][0] == [0, 0, 0, 1, 1]


def test_cls_projection_is_d_by_d(tiny_backbone):
    from stsreg.experiments.baselines.encoders import TransformerBiEncoder

    model = TransformerBiEncoder(tiny_backbone, "cls", "linear", max_length=16)
    assert model.projection.weight.shape == (32, 32)


# -- the experiment ------------------------------------------------------------------------------------------------
def test_catalogue_matches_the_params_choices():
    from stsreg.infra.config import BASELINE_SYSTEMS

    assert tuple(experiment.SYSTEMS) == BASELINE_SYSTEMS


def test_every_setting_is_read_by_a_system_and_a_system_sees_only_its_own():
    import dataclasses

    from stsreg.infra.config import BaselinesParams, ModelParams, Params

    fields = {f.name for f in dataclasses.fields(BaselinesParams)}
    read = {k for s in experiment.SYSTEMS.values() for k in s.reads}
    # the experiment itself reads `systems`; the retrieval-cost task reads `retrieval_candidates` (and the backbone);
    # `precision` comes from the model section
    assert read - fields == {"precision"} and fields - read == {"systems", "retrieval_candidates"}
    assert experiment.settings(Params(), "lstm_glove") == {
        "rnn_hidden": 256, "max_train_pairs": 0, "rnn_epochs": BaselinesParams().rnn_epochs, "rnn_lr": 1e-3,
        "rnn_batch_size": 32}
    bf16 = Params(model=ModelParams(precision="bf16"))
    assert experiment.settings(bf16, "sbert")["precision"] == "bf16"  # a change of model.precision reruns sbert
    assert "precision" not in experiment.settings(bf16, "lstm")       # ... and not the recurrent systems
    view = experiment._view(Params(), "glove_pretrained")
    with pytest.raises(AttributeError):
        view.backbone  # undeclared: the run's key could not see it change


def test_word_vectors_round_trip_with_their_source(tmp_path):
    vectors = wordvec.WordVectors(["a", "b"], np.eye(2), "GloVe 2d (self-trained)")
    vectors.save(tmp_path / "vectors")
    back = wordvec.WordVectors.load(tmp_path / "vectors")
    assert back.words == ["a", "b"] and back.source == "GloVe 2d (self-trained)"
    assert np.array_equal(back.vectors, np.eye(2, dtype=np.float32))


def test_training_and_selection_read_only_stsb_train_and_dev():
    from tests.conftest import tiny_eval_table

    train = tiny_sts(10).assign(dataset="stsb", split="train", subset="", file="f", line=range(10), seen_in_train=False)
    sts = pd.concat([tiny_eval_table(12), train], ignore_index=True)
    tr, dev = experiment.study_splits(sts, 0, 0)
    assert set(zip(tr.dataset, tr.split)) == {("stsb", "train")} and set(zip(dev.dataset, dev.split)) == {("stsb",
                                                                                                           "dev")}
    assert len(tr) == 10 and len(experiment.study_splits(sts, 4, 0)[0]) == 4


def test_pearson_interval_and_mse_on_label_over_5():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 300)
    pred = gold / 5 + rng.normal(0, 0.1, 300)
    low, high = metrics.pearson_ci(gold, pred, 500, 0, 0.95)
    point = np.corrcoef(gold, pred)[0, 1] * 100
    assert low < point < high and high - low < 5
    from stsreg.infra.config import Params
    from tests.conftest import tiny_eval_table

    scored = tiny_eval_table(30).assign(task=lambda d: d.dataset.where(d.split == "test", "stsb_dev"),
                                        cosine=lambda d: d.score / 5 + 0.1, prediction=0.0)
    m = metrics.metrics_of(scored, Params())
    assert m["stsb_mse01"] == pytest.approx(0.01) and m["stsb_pearson"] == pytest.approx(100)


def test_word2vec_row_without_a_file_is_unavailable(tmp_path):
    from stsreg.infra.config import Params

    with pytest.raises(experiment.Unavailable, match="not available offline"):
        experiment.build("word2vec_pretrained", Params(), pd.DataFrame(), pd.DataFrame(), tmp_path)
