"""The model card: a README.md in sentence-transformers' model-card style for a trained model folder.

Written at registration (the 7-task scores exist then) into the registered MLflow model, beside its weights, and
to ``reports/registry/model_card.md``. Everything in it is read from the resolved params, the model folder and the
evaluation's ``metrics.json`` / ``table.md``: nothing is typed in by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

from stsreg.infra import public_tables
from stsreg.infra.config import Params
from stsreg.infra.loss_specs import LOSSES
from stsreg.product import backbones
from stsreg.product.runners.warm_start import origin_of, warm_text

PAPER = ("Zhang & Li, \"Advancing Semantic Textual Similarity Modeling: A Regression Framework with Translated ReLU "
         "and Smooth K2 Loss\", EMNLP 2024 (arXiv 2406.05326)")


def _base_model(backbone: str) -> str:
    """The hub name of the backbone: a packaged one (``default`` is all-MiniLM-L6-v2) by its sentence-transformers
    name; any other name or local path as given."""
    entry = backbones.find(backbone)
    return f"sentence-transformers/{entry.name}" if entry else backbone


def _score_served(model_config: dict) -> str:
    if model_config.get("score_map"):
        a, b = model_config["score_map"]
        return f"clamp({a:g} * cos(u, v) + {b:g}, 0, 5) on the 0-5 STS scale"
    return "the regression head's output on [u, v, |u-v|], on the 0-5 STS scale"


def _scale_served(scale: tuple[float, float]) -> str:
    lo, hi = scale
    if (lo, hi) == (0.0, 5.0):
        return "0-5, the STS scale the model trained on; `stsreg serve --scale LO HI` maps it to another"
    return f"{lo:g}-{hi:g}: the model's 0-5 score mapped linearly (`{lo:g} + score * {hi - lo:g} / 5`)"


def _precision_served(setting: str) -> str:
    if setting == "auto":
        return ("`auto`: fp32 on a CPU (a text's vector does not depend on the batch it lands in; CPU bf16 kernels "
                "break that), bf16 autocast on a GPU with native bf16 where a probe shows the embeddings hold; "
                "`stsreg serve --precision bf16` forces bf16; `GET /metadata` says which is in use")
    return f"`{setting}`; `GET /metadata` of `stsreg serve` confirms it"


def _stage1(p: Params) -> str:
    enc = p.stage1.encoder
    step = ("none (the encoder stays the backbone)" if enc.objective == "none" else
            f"`{enc.objective}`, {enc.epochs} epoch(s), batch {enc.batch_size}, lr {enc.lr:g}, warmup "
            f"{enc.warmup_ratio:g}")
    return (f"- **Stage 1, NLI** ({', '.join(p.prepare.nli_train)}): encoder step {step}; then the one-node head on "
            f"[u, v, |u-v|] with the encoder frozen: `{p.stage1.loss}` (x0 {p.stage1.x0:g}, k {p.stage1.k:g}), "
            f"{p.stage1.epochs} epochs, batch {p.stage1.batch_size}, lr {p.stage1.lr:g}.")



def _table(p: Params, name: str) -> str:
    t = {t.name: t for t in p.prepare.sts_tables}.get(name)
    if t is None or t.reader:
        return public_tables.display(name)
    mapped = "mapped to 0-5" if t.rescale else "kept as annotated"
    return f"{name} ({t.file}, scale [{t.scale[0]:g}, {t.scale[1]:g}] {mapped}, d {t.d:g})"


def _stage2(p: Params, model_dir: Path | None = None) -> str:
    """The stage-2 line; a warm retrain (``training_summary.json``'s ``started_from``: the champion) names the version
    it continued, its own epochs and lr and, with a replay below 1, the rows it trained
    (:mod:`stsreg.product.runners.warm_start`)."""
    s = p.stage2
    spec = LOSSES[s.loss]
    knobs = spec.card_line({name: getattr(s, name) for name in spec.knobs()})
    loss = f"`{s.loss}`" + (f" ({knobs})" if knobs else "")
    tables = " + ".join(f"{_table(p, t)} train" for t in s.train_tables)
    origin = origin_of(model_dir) if model_dir else {"from": "stage1"}
    epochs, lr, start = s.epochs, s.lr, ""
    if origin.get("from") == "champion":
        epochs, lr = s.warm_start.epochs, s.warm_start.lr
        start = f"started from {warm_text(origin)}, "
    return (f"- **Stage 2, STS** ({tables}, labels `{s.labels}`): {start}everything fine-tuned with {loss}, "
            f"{epochs} epoch(s), batch {s.batch_size}, lr {lr:g}, weight decay {s.weight_decay:g}, warmup "
            f"{s.warmup_ratio:g}, layer decay {s.layer_decay:g}; the checkpoint kept is the `{s.keep}` "
            f"{_table(p, s.dev_table).split(' (')[0]} dev evaluation (every {s.eval_every} steps). No test label is "
            "read during training or selection.")


def _backends(verdicts: dict[str, dict] | None, setting: str) -> list[str]:
    """The section on what can run the encoder: each backend's file, avg7, drop against torch and verdict."""
    if not verdicts:
        return []
    rows = ["## Serving backends", "",
            f"`serve.backend` is `{setting}` (`auto`: torch on a GPU; on a CPU the fastest of the backends allowed "
            "below, measured when serving starts; `GET /metadata` says which runs). Exports scored on the same test "
            "pairs as "
            "the model, at the same maximum length.", "",
            "| backend | file | avg7 | avg7 change vs torch | serving |", "|---|---|---|---|---|"]
    for backend, v in verdicts.items():
        file = f"`{v['file']}` ({v['mib']:g} MiB)" if "file" in v else "`model.safetensors`"
        change = round(-v["drop"], 2) + 0.0  # + 0.0: a drop of 0 prints +0.00, not -0.00
        rows.append(f"| {backend} | {file} | {v['avg7']:.2f} | {change:+.2f} | {'yes' if v['serving'] else 'no'}: "
                    f"{v['reason']} |")
    return [*rows, ""]


def _head(params: Params, model_dir: Path) -> tuple[list[str], dict, object, str]:
    """The front matter and title of a card of ``model_dir``: (lines, its stsreg_model.json, its dimension, base)."""
    config = json.loads((model_dir / "stsreg_model.json").read_text())
    dim = json.loads((model_dir / "config.json").read_text()).get("hidden_size", "?")
    base = _base_model(params.model.backbone)
    front = ["---", f"base_model: {base}", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity",
             "language: [en]", "tags: [sentence-transformers, sentence-similarity, feature-extraction, stsreg, "
             f"{params.stage2.loss.replace('_', '-')}]", "---"]
    return [*front, "", f"# {base} fine-tuned for semantic textual similarity (stsreg)", ""], config, dim, base


def _details(params: Params, config: dict, dim, base: str, length_note: str, git_commit: str | None) -> list[str]:
    """The details table; ``git_commit`` None leaves the code row out (a DVC output must not change with the commit)."""
    code = [f"| Code | stsreg, git commit `{git_commit}` |"] if git_commit else []
    return ["## Model details", "", "| | |", "|---|---|", f"| Base model | `{base}` |",
            f"| Maximum sequence length | {config['max_length']} tokens ({length_note}) |",
            f"| Output dimension | {dim} |", f"| Pooling | {config['pooling']} |", "| Similarity | cosine |",
            f"| Score served (`stsreg serve`, MLflow pyfunc) | {_score_served(config)} |",
            f"| Serving precision (`serve.precision`) | {_precision_served(params.serve.precision)} |",
            f"| Served score scale (`serve.scale`) | {_scale_served(params.serve.scale)} |",
            *code, ""]


_USAGE = ["## Usage", "", "```python", "from sentence_transformers import SentenceTransformer", "",
          "model = SentenceTransformer(\"path/to/this/folder\")",
          "emb = model.encode([\"A man is playing a guitar.\", \"Someone plays an instrument.\"])",
          "print(model.similarity(emb[0], emb[1]))", "```", ""]

_LIMITS = ["## Intended use and limitations", "",
           "English sentence pairs of up to a few dozen words: semantic search, deduplication, clustering, scoring "
           "paraphrases on the 0-5 STS scale. Trained on the tables and the NLI data named above: scores on other "
           "domains and languages are not measured here; longer inputs are truncated at the maximum sequence length. "
           "Scores are similarities, not probabilities.", "", "## Citation", "", PAPER + ".", ""]


def render(params: Params, model_dir: Path, metrics: dict, table_md: str, git_commit: str = "unknown",
           backends: dict[str, dict] | None = None) -> str:
    """The registered version's card. ``metrics``: the evaluation's ``metrics.json`` (Spearman x100,
    ``*_low``/``*_high`` the 95% bootstrap interval); ``table_md``: its ``table.md`` (the 7 tasks, both test views);
    ``backends``: the exports' verdicts (:func:`stsreg.product.serving.packaging.package`)."""
    head, config, dim, base = _head(params, model_dir)
    lines = [
        *head,
        f"A sentence-transformers model trained by stsreg with the regression framework of {PAPER}: the cosine of "
        f"two {dim}-dimensional sentence embeddings is their similarity. It scores avg7 "
        f"{metrics['avg7_spearman']:.2f} Spearman [{metrics['avg7_spearman_low']:.2f}, "
        f"{metrics['avg7_spearman_high']:.2f}] on STS12-16, STS-B and SICK-R, {metrics['avg7_unseen_spearman']:.2f} "
        "on the test pairs that no training table contains.", "",
        *_details(params, config, dim, base, "evaluated and served", git_commit), *_USAGE,
        "From the registry: `mlflow.pyfunc.load_model(\"models:/sts-regression@champion\").predict(df)` with columns "
        "`sentence1`, `sentence2` (a 0-5 score and the cosine per pair), or `stsreg serve` for a REST endpoint.", "",
        "## Training", "", _stage1(params), _stage2(params, model_dir), "",
        "## Evaluation", "",
        "Spearman x100 of the cosine, 95% bootstrap intervals. *Unseen*: only the test pairs that no training table "
        f"contains (match `{params.prepare.leakage.match}`): STS-B train holds many STS12-16 test pairs.", "",
        table_md.strip(), "", *_backends(backends, params.serve.backend), *_LIMITS]
    return "\n".join(lines)


def render_trained(params: Params, model_dir: Path, summary: dict) -> str:
    """The card of stage 2's output folder (``models/stage2``), before any test set is read: what it is, how it was
    trained and the dev score that kept it. ``summary``: its ``training_summary.json`` (``best_dev_spearman`` x100 at
    ``best_step`` of ``steps``). The registered copy's card (:func:`render`) adds the test scores and the exports."""
    head, config, dim, base = _head(params, model_dir)
    dev = _table(params, params.stage2.dev_table).split(" (")[0]
    kept = summary.get("best_dev_spearman")
    score = (f"The checkpoint kept scores {kept:.2f} Spearman x100 on {dev} dev (step {summary.get('best_step')} of "
             f"{summary.get('steps')})." if kept is not None else "")
    lines = [
        *head,
        f"A sentence-transformers model trained by stsreg with the regression framework of {PAPER}: the cosine of "
        f"two {dim}-dimensional sentence embeddings is their similarity. {score} Its test scores are written by the "
        "evaluation (`dvc repro evaluate`: `reports/eval/table.md`) and carried by the registered version's card.", "",
        *_details(params, config, dim, base, "the training length; the registered copy is set to the evaluated one",
                  None), *_USAGE,
        "## Training", "", _stage1(params), _stage2(params, model_dir), "", *_LIMITS]
    return "\n".join(lines)
