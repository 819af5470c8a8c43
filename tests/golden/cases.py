"""The golden cases: each product stage and each experiment kind run on a tiny fixed sample (a seeded 2-layer BERT,
the fixture tree, synthetic pairs), in fp32 on one thread, by the same runner functions the stages call. Each case
returns ``{output name: digest}``; :mod:`tests.golden.__main__` compares them with ``tests/golden/hashes.json``.

A case is a function of the shared :class:`Golden` context, listed in :data:`CASES` in the order they run (a later
case reads what an earlier one wrote: stage 2 starts from stage 1's folder, evaluate and export read stage 2's)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import yaml

from stsreg.infra.method_specs import COMPARE, NLI
from stsreg.product.serving.export import BACKENDS
from tests.golden import digest

#: What the tiny runs change in the project's params.yaml: small model inputs, few steps, fp32 (bf16 depends on the
#: CPU), every check that a tiny fixture cannot pass turned off.
TINY = {
    "model": {"max_length": 16, "precision": "fp32"},
    "prepare": {"max_rejected_fraction": 1.0,
                "nli_train": ["snli/dev", "snli/test", "snli_cad/train", "mnli/dev_matched"]},
    "stage1": {"epochs": 1},
    "stage2": {"batch_size": 8, "eval_every": 4, "checkpoint_every_s": 3600, "lr": 1e-3, "contrastive_min_label": 4.0},
    "evaluate": {"max_length": 24, "n_resamples": 50},  # unlike model.max_length: the served folder records this one
    "compare": {"epochs": 1},
    "nli_table": {"max_pairs": 24, "batch_size": 8},
    "baselines": {"max_length": 16, "max_train_pairs": 48, "epochs": 1, "batch_size": 8, "eval_every": 4,
                  "rnn_epochs": 1, "rnn_batch_size": 8, "rnn_dim": 16, "rnn_hidden": 16, "word_dim": 16,
                  "word_epochs": 1, "word_min_count": 1},
}
#: Pairs each loss of the ``losses`` case trains on (3 steps of 8).
LOSS_PAIRS = 24
#: The comparison rows trained: every declared row that trains (tests/unit/test_golden_coverage.py).
COMPARE_METHODS = tuple(m.name for m in COMPARE.values() if m.loss)
#: The NLI-only objectives trained: every declared objective that trains.
NLI_OBJECTIVES = tuple(o.name for o in NLI.values() if o.kind)
#: Objectives that see only differences of embeddings: the last LayerNorm bias is free (:data:`digest.FREE_SHIFT`).
SHIFT_FREE_OBJECTIVES = ("triplet",)
#: Baseline systems, one per family that trains: self-trained word vectors, a recurrent encoder, a cross-encoder,
#: a bi-encoder.
BASELINE_SYSTEMS = ("word2vec_skipgram", "gru", "cross_linear", "sbert")


USER_SUBJECTS = ("man", "woman", "child", "dog", "cat", "sad", "happy", "red", "blue", "fast", "slow", "music")
USER_OBJECTS = ("guitar", "music", "ball", "car", "food", "park", "sofa", "dog", "cat", "woman")
#: A table of the user's as a spreadsheet exports it: UTF-8 BOM, CRLF, RFC 4180 quoting (a quoted tab-free comma, a
#: doubled quote, a line break inside a field), a 0-100 scale, splits by hash; one row with no score (rejected).
USER_TABLE = {"name": "support", "file": "data/tables/support.csv", "scale": [0, 100], "d": 10}
USER_FILE = ("\ufeffsentence1,sentence2,score\r\n"
             + "".join(f'"a {a} plays, the {b}","the {b} is ""played"" by {a}",{(i * 10) % 110}\r\n'
                       for i, (a, b) in enumerate((a, b) for a in USER_SUBJECTS for b in USER_OBJECTS))
             + '"a child\r\neats food",the child eats,70\r\nno score here,none,\r\n').encode("utf-8")


@dataclasses.dataclass
class Golden:
    """The run's folder, the tiny backbone and params, the tables the cases share."""
    root: Path
    backbone: str
    params: object = None

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)


def setup(root: Path) -> Golden:
    """The tiny backbone, params.yaml with :data:`TINY` applied, the synthetic STS and NLI tables."""
    from stsreg.infra.config import parse_params
    from tests.conftest import REPO, TINY_WORDS, tiny_eval_table, tiny_sts
    from tests.helpers.backbones import tiny_backbone_of
    from tests.helpers.nli import grouped_nli

    g = Golden(root, tiny_backbone_of("bert", root / "backbone", list(TINY_WORDS)))
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    for section, values in TINY.items():
        unknown = set(values) - set(raw[section])
        assert not unknown, f"golden TINY names {section}.{sorted(unknown)}, which params.yaml does not have"
        raw[section].update(values)
    raw["model"]["backbone"] = g.backbone
    raw["prepare"]["sts_tables"].append(USER_TABLE)
    (root / "data/tables").mkdir(parents=True)
    (root / USER_TABLE["file"]).write_bytes(USER_FILE)
    raw["baselines"]["backbone"] = g.backbone
    g.params = parse_params(raw, "golden params")
    train = tiny_sts(64, seed=9).assign(dataset="stsb", split="train", subset="x", file="t", line=range(64),
                                        seen_in_train=False)
    pd.concat([tiny_eval_table(40), train], ignore_index=True).to_parquet(root / "sts.parquet")
    grouped_nli(14).to_parquet(root / "nli.parquet")
    return g


def prepare(g: Golden) -> dict:
    """The fixture tree (every raw format, broken rows included) -> prepared tables, rejects, summary."""
    from stsreg.product.data.prepare import prepare as run
    from tests.conftest import FIXTURE_RAW, fixture_registry

    out = g.path("data")
    run(FIXTURE_RAW, out / "prepared", out / "rejected", out / "prepare.json", g.params,
        registry=fixture_registry(out / "sources.json"), project=g.root)
    rejected = digest.of_tree(out / "rejected", g.root, exact=True)
    return {**digest.of_tree(out / "prepared", g.root, exact=True), **{f"rejected/{k}": v for k, v in rejected.items()},
            "prepare.json": digest.of_json(out / "prepare.json", g.root)}


def stage1(g: Golden) -> dict:
    """The encoder step (supervised SimCSE on NLI triples) then the head on the frozen encoder."""
    from stsreg.product.runners.stage1_runner import run_stage1

    run_stage1(g.params, g.path("nli.parquet"), g.path("models/stage1"), g.path("cache/embeddings"),
               ckpt_dir=g.path("checkpoints/stage1"))
    return digest.of_tree(g.path("models/stage1"), g.root)


def stage2(g: Golden) -> dict:
    """Stage 2 (the production loss) from stage 1's folder, selected on the dev split, published as the stage does
    (its card, the sentence-transformers files, the evaluation's truncation length)."""
    from pipelines.product.stage2_flow import publish
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start

    summary = run_stage2(Start(g.path("models/stage1"), g.params), g.path("sts.parquet"), g.path("models/stage2"),
                         g.path("checkpoints/stage2"))
    publish(g.params, g.path("models/stage2"), summary)
    return digest.of_tree(g.path("models/stage2"), g.root)


def evaluate(g: Golden) -> dict:
    """The 7-task evaluation of stage 2's model: per-pair predictions, metrics with intervals, the table."""
    from stsreg.product.runners.eval_runner import run_evaluate

    run_evaluate(g.params, g.path("models/stage2"), g.path("sts.parquet"), g.path("eval"))
    return digest.of_tree(g.path("eval"), g.root)


SENTENCES = ["a man plays the guitar", "the dog runs in the park", "a child eats food on the sofa", "cat sleeps"] * 3


def export(g: Golden) -> dict:
    """The registered folder as register packages it (ONNX fp32 / int8 exports judged against torch on the
    evaluation pairs), and the served encodings and pair scores of each backend on fixed sentences."""
    import json

    import torch

    from stsreg.product.serving import export as ex
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.serving.packaging import package

    folder = g.path("registered")
    package(g.params, g.path("models/stage2"), folder, g.path("sts.parquet"),
            json.loads(g.path("eval/metrics.json").read_text()))
    # auto's measurement (rates of this machine, this minute) is a timing, not an output: never the same twice
    out = {k: v for k, v in digest.of_tree(folder, g.root).items() if not k.endswith(".onnx") and k != ex.MEASURED}
    for backend in BACKENDS:
        model = ex.use_backend(SiameseRegressor.load(folder, precision="fp32"), backend, folder, threads=1)
        with torch.no_grad():
            u = model.encode(SENTENCES, 4, show_progress=False).float()
            score = model.predict(u[:6], u[6:]).float()
        out[backend] = digest.print_arrays({"embeddings": u.numpy(), "scores": score.numpy()})
    return out


def losses(g: Golden) -> dict:
    """Stage 2 from stage 1's folder with every declared stage-2 loss (:data:`stsreg.infra.loss_specs.LOSSES`), a few
    steps each: the kept weights and the training summary."""
    from stsreg.infra.config import with_overrides
    from stsreg.infra.loss_specs import LOSSES
    from stsreg.product.runners.stage2_runner import run_stage2
    from stsreg.product.runners.start import Start

    out = {}
    for name in LOSSES:
        params = with_overrides(g.params, {"stage2.loss": name, "stage2.max_train_pairs": LOSS_PAIRS})
        model = g.path("losses", name)
        run_stage2(Start(g.path("models/stage1"), params), g.path("sts.parquet"), model,
                   g.path("checkpoints/losses", name))
        out.update({f"{name}/{k}": v for k, v in digest.of_tree(model, g.root).items()
                    if k.endswith((".safetensors", "training_summary.json"))})
    return out


def compare(g: Golden) -> dict:
    """One seed of every trained comparison row (each stage-2 loss): the kept weights and the training summary."""
    from stsreg.experiments.compare import train_method

    out = {}
    for method in COMPARE_METHODS:
        work = g.path("compare", f"{method}-1")
        model = train_method(dataclasses.replace(g.params, seed=1), method, g.path("sts.parquet"),
                             g.path("nli.parquet"), work,
                             lambda *a: None, cache_dir=g.path("cache/embeddings"))
        out.update({f"{method}/{k}": v for k, v in digest.of_tree(model, g.root).items()})
    return out


def nli_table(g: Golden) -> dict:
    """Every NLI-only objective, one seed: the trained encoder and its summary."""
    from stsreg.experiments.nli_table import run_row

    nli = pd.read_parquet(g.path("nli.parquet"))
    out = {}
    for name in NLI_OBJECTIVES:
        work = g.path("nli_table", f"{name}-42")
        model = run_row(g.params, name, 42, nli, work)
        free = digest.FREE_SHIFT if name in SHIFT_FREE_OBJECTIVES else digest.FREE
        out.update({f"{name}/{k}": v for k, v in {**digest.of_tree(model, g.root, free=free),
                                                  **digest.of_tree(work / "nli_summary.json", g.root)}.items()})
    return out


def baselines(g: Golden) -> dict:
    """One system per training family of the comparative study: predictions, fit summary, metrics."""
    from stsreg.experiments.baselines.experiment import run_system

    sts, nli = pd.read_parquet(g.path("sts.parquet")), pd.read_parquet(g.path("nli.parquet"))
    out = {}
    for name in BASELINE_SYSTEMS:
        work = g.path("baselines", name)
        metrics = run_system(g.params, name, sts, nli, work)
        out[f"{name}/metrics"] = digest.print_value(metrics, str(g.root))
        out.update({f"{name}/{k}": v for k, v in digest.of_tree(work, g.root).items() if not k.endswith(".pt")})
    return out


#: name -> case, in the order they run.
CASES = {f.__name__: f for f in (prepare, stage1, stage2, evaluate, export, losses, compare, nli_table, baselines)}

#: Each DVC stage -> the golden cases that run its code (``make recommit`` records a code change of a stage only when
#: one of these calls the changed code and golden holds; a stage with none reruns on any change of its code). The
#: search trials and the backbone comparison train through the same runners as stage 2 and the comparison.
STAGES: dict[str, tuple[str, ...]] = {
    "fetch": (), "prepare": ("prepare",), "stage1": ("stage1",), "stage2": ("stage2", "losses"),
    "evaluate": ("evaluate",), "register": ("export",), "promote": (), "compare": ("compare", "losses"),
    "compare_backbone": ("compare", "losses"), "search_backbone": ("stage2", "losses"),
    "search": ("stage2", "losses"), "profile": (), "nli_table": ("nli_table",), "baselines": ("baselines",),
    "claims": (),
}
