"""The arguments of the stage subcommands (``stsreg fetch`` ... ``stsreg profile``): one function per subcommand,
``<verb>(sub, name)``, adding its parser with every flag's help and default and its handler. :data:`stsreg.cli.COMMANDS`
declares which are stages, load the backbone and read which inputs."""

from __future__ import annotations

from stsreg import commands, commands_train

PARAMS_HELP = "the params file (validated whole before anything runs)"


def add_params(parser) -> None:
    """The ``--params`` flag of a command that reads params.yaml (validated whole before it runs)."""
    parser.add_argument("--params", default="params.yaml", help=PARAMS_HELP)


def fetch(sub, name: str) -> None:
    f = sub.add_parser(name, help="copy/download raw files into data/raw and verify sha256",
                       description="Copy every file of the sources registry from a mirror folder (or its upstream URL) "
                                   "into data/raw and verify its sha256.")
    add_params(f)
    f.add_argument("--registry", default="data/sources.json", help="sources registry (dataset, file, sha256, url)")
    f.add_argument("--mirror", default=None, help="mirror folder; overrides STSREG_DATA_MIRROR and fetch.mirror")
    f.add_argument("--out", default="data/raw", help="where the raw files go")
    f.add_argument("--no-download", action="store_true", help="never try upstream URLs")
    f.set_defaults(func=commands.cmd_fetch)


def prepare(sub, name: str) -> None:
    p = sub.add_parser(name, help="validate raw files into parquet tables, rejects and data metrics",
                       description="Parse every raw format, validate with pandera, write data/prepared/*.parquet, "
                                   "data/rejected/<dataset>.parquet, data/prepared/summary.json and its headline metrics/data.json.")
    add_params(p)
    p.add_argument("--raw", default="data/raw", help="the raw files (fetch's output)")
    p.add_argument("--registry", default="data/sources.json",
                   help="sources registry: every file a dataset needs is checked (present, non-empty, min_rows) first")
    p.add_argument("--prepared", default="data/prepared", help="the prepared tables and summary.json")
    p.add_argument("--rejected", default="data/rejected", help="rejected rows and duplicates")
    p.add_argument("--metrics", default="metrics/data.json", help="the headline data metrics")
    p.set_defaults(func=commands.cmd_prepare)


def train(sub, name: str) -> None:
    t = sub.add_parser(name, help="run training stage 1 (head on NLI) or 2 (fine-tune on STS) as a Prefect flow",
                       description="Stage 1: the encoder trained on NLI (stage1.encoder.objective), then frozen while the "
                                   "head trains on cached NLI embeddings. Stage 2: everything fine-tuned on STS-B + SICK-R "
                                   "train, best STS-B dev checkpoint kept, resumable; under torchrun (or launch.stage2_nproc "
                                   "> 1) as DDP, rank 0 writing the same outputs and MLflow run as one process.")
    t.add_argument("--stage", choices=["1", "2"], required=True, help="1: NLI (encoder step, head); 2: STS fine-tuning")
    add_params(t)
    t.add_argument("--nli", default="data/prepared/nli_train.parquet", help="stage 1: the NLI training table")
    t.add_argument("--sts", default="data/prepared/sts.parquet", help="stage 2: the STS table (train and dev rows)")
    t.add_argument("--stage1-dir", default="models/stage1", help="stage 1's model (stage 2 starts from it)")
    t.add_argument("--stage2-dir", default="models/stage2", help="stage 2's model")
    t.add_argument("--cache", default="cache/embeddings", help="stage-1 embedding cache")
    t.add_argument("--checkpoints", default="checkpoints/stage2", help="stage-2 resumable checkpoints")
    t.add_argument("--fresh", action="store_true", help="stage 2: delete --checkpoints and train from step 0 (a checkpoint "
                   "of other code, settings or data is never resumed anyway)")
    t.add_argument("--metrics", default=None, help="headline metrics file (none given: metrics/stage<N>.json; '' = none)")
    t.add_argument("--curves", default="reports/stage2", help="stage 2: folder for dev_curve.csv and loss_curve.csv ('' = none)")
    t.set_defaults(func=commands_train.cmd_train)


def evaluate(sub, name: str) -> None:
    e = sub.add_parser(name, help="the STS evaluation: 7 public tasks (avg7) and the test split of each table "
                                        "you declared, with bootstrap intervals (Prefect flow, MLflow run)",
                       description="SentEval 'all' protocol on STS12-16, STS-B test, SICK-R test (+ subsets, STS-B dev, "
                                   "Pearson, head Spearman, unseen view) and on the test split of every table declared "
                                   "in prepare.sts_tables (its own row, not in avg7), 95% bootstrap intervals. Writes "
                                   "reports/eval/{metrics.json,predictions.parquet,table.md}.")
    add_params(e)
    e.add_argument("--model", default="models/stage2", help="saved model folder, or a backbone name/path (untouched)")
    e.add_argument("--sts", default="data/prepared/sts.parquet", help="the STS table (test rows scored)")
    e.add_argument("--out", default="reports/eval", help="metrics.json, predictions.parquet, table.md")
    e.add_argument("--headline", default="metrics/eval.json", help="the headline metrics file ('' = none)")
    e.set_defaults(func=commands.cmd_evaluate)


def register(sub, name: str) -> None:
    g = sub.add_parser(name, help="log the model as an MLflow pyfunc and register it as `challenger`",
                       description="Log models/stage2 as a pyfunc (sentence1, sentence2 -> cosine, score) in the "
                                   "evaluation's MLflow run with its model card; register a version of sts-regression, alias challenger.")
    add_params(g)
    g.add_argument("--model", default="models/stage2", help="the model folder to register")
    g.add_argument("--eval-dir", default="reports/eval", help="its evaluation (metrics and MLflow run)")
    g.add_argument("--out", default="reports/registry/challenger.json", help="the registered version (model_card.md beside it)")
    g.set_defaults(func=commands.cmd_register)


def promote(sub, name: str) -> None:
    pr = sub.add_parser(name, help="move alias `champion` to the challenger if it wins the gate",
                        description="Promote when every metric of promote.metrics (avg7, the mean of the 7 public "
                                    "tasks, and/or a declared table's test split, e.g. [avg7, support]) gains >= "
                                    "promote.margin with a paired bootstrap p < promote.alpha, pairs matched by content; "
                                    "with no champion yet, against the untouched backbone. Where the champion's stored "
                                    "predictions miss today's test pairs it is re-scored first. The decision (per metric: "
                                    "pairs compared, gain, interval, p) goes to --out and is tagged on the version.")
    add_params(pr)
    pr.add_argument("--out", default="reports/registry/promotion.json", help="the decision and its reason")
    pr.add_argument("--headline", default="metrics/promote.json", help="the decision's headline numbers ('' = none)")
    pr.set_defaults(func=commands.cmd_promote)


def compare(sub, name: str) -> None:
    cm = sub.add_parser(name, help="base vs +Contrast vs CoSENT vs cosine MSE vs +Ours vs Translated ReLU vs MSE (resumable)",
                        description="Train and evaluate every compare.methods x compare.seeds on the same data; write "
                                    "reports/compare/{results.md,results.csv,paired.csv,avg7.png} and metrics/compare.json.")
    add_params(cm)
    cm.add_argument("--backbone", default=None,
                    help="the same rows on another backbone (a packaged name, e.g. all-mpnet-base-v2, a Hugging Face name "
                         "or a local path) -> reports/compare_backbones/<name>/, with its declared settings "
                         "(stsreg.experiments.backbone_compare.SETTINGS)")
    cm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param for this comparison (repeatable), e.g. --set compare.seeds=[42,43]")
    cm.add_argument("--out", default=None, help="with --backbone / --set: the comparison's folder")
    cm.set_defaults(func=commands.cmd_compare)


def nli_table(sub, name: str) -> None:
    nt = sub.add_parser(name, help="the NLI-only objective table (the paper's Table 1 analogue; resumable)",
                        description="Train the whole encoder on the NLI table with every nli_table.objectives x "
                                    "nli_table.seeds (softmax CE, MSE, L1, Translated ReLU, Smooth K2, triplet, supervised "
                                    "and unsupervised SimCSE, plus the untouched backbone), score each on the 7 tasks; "
                                    "write reports/nli_table/{results.md,results.csv,paired.csv,avg7.png} and "
                                    "metrics/nli_table.json.")
    add_params(nt)
    nt.set_defaults(func=commands.cmd_nli_table)


def baselines(sub, name: str) -> None:
    bl = sub.add_parser(name, help="the comparative study's systems on STS-B (word vectors to cross-encoders; "
                                          "resumable)",
                        description="Train every baselines.systems on STS-B train (selected on STS-B dev): averaged "
                                    "pretrained / self-trained word vectors, RNN / LSTM / GRU, InferSent, CLS-projection "
                                    "and mean-pooling bi-encoders, cross-encoders, S-LLM full and LoRA; score each on "
                                    "STS-B test (Pearson, Spearman, MSE on label / 5) and the 7 tasks; measure a "
                                    "cross-encoder's retrieval cost; write reports/baselines/{results.md,results.csv,"
                                    "stsb.png} and metrics/baselines.json.")
    add_params(bl)
    bl.set_defaults(func=commands.cmd_baselines)


def search(sub, name: str) -> None:
    sr = sub.add_parser(name, help="Optuna search over stage 2 scored on STS-B dev only (resumable)",
                        description="Run (or continue) the study of params.search: each trial fine-tunes models/stage1 "
                                    "with sampled stage-2 settings and is scored by its best STS-B dev Spearman after "
                                    "step 0 (test rows are never read); a median pruner stops weak trials. Writes "
                                    "reports/search/{results.md,trials.csv,best.json,dev_by_trial.png,study.db} and "
                                    "metrics/search.json; one MLflow run per trial under a parent run.")
    add_params(sr)
    sr.add_argument("--backbone", default=None,
                    help="search on another backbone (a packaged name, e.g. all-mpnet-base-v2, a Hugging Face name or a "
                         "local path), from its comparison's stage-1 model, scored on its STS-B dev -> "
                         "reports/search_backbones/<name>/, with its declared points "
                         "(stsreg.experiments.backbone_search.SETTINGS)")
    sr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param for this search (repeatable), e.g. --set search.trials=3")
    sr.add_argument("--out", default=None, help="with --backbone / --set: the search's folder")
    sr.set_defaults(func=commands.cmd_search)


def claims(sub, name: str) -> None:
    cl = sub.add_parser(name, help="the paper's claims with our numbers, intervals and verdicts -> reports/claims.md",
                        description="Read each backbone's comparison ({results,paired}.csv of reports/compare and "
                                    "reports/compare_backbones/<name>) and metrics/profile.json (nothing is trained) "
                                    "and write reports/claims.md: each claim, one column per backbone with the paired "
                                    "difference, its 95% CI and p per seed, and a verdict.")
    add_params(cl)
    cl.add_argument("--compare", default="reports/compare", help="the comparison's outputs on model.backbone")
    cl.add_argument("--backbone-compare", action="append", metavar="DIR",
                    help="a comparison on another backbone (stsreg compare --backbone), one column each; repeatable "
                         "(default: reports/compare_backbones/<name> of every backbone with declared settings)")
    cl.add_argument("--profile-metrics", default="metrics/profile.json", help="the profile's memory ratio")
    cl.add_argument("--nli-table", default="reports/nli_table", help="the NLI-only table's outputs (claims 1 and 2)")
    cl.add_argument("--out", default="reports/claims.md", help="the claims table")
    cl.set_defaults(func=commands.cmd_claims)


def profile(sub, name: str) -> None:
    pf = sub.add_parser(name, help="peak memory and step time per (method, batch, length); memory_ratio (resumable)",
                        description="Run a few real training steps of regression (frozen encoder / full) and contrastive "
                                    "(hard negatives) per profile.batch_sizes x profile.lengths, each in its own process; "
                                    "configurations predicted over profile.memory_budget_mb or profile.max_step_s are "
                                    "predicted by a cost model instead. Writes reports/profile/{table.md,profile.csv,"
                                    "memory_vs_length.png} and metrics/profile.json (memory_ratio).")
    add_params(pf)
    pf.add_argument("--out", default="reports/profile", help="tables and plot")
    pf.add_argument("--metrics", default="metrics/profile.json", help="memory_ratio")
    pf.set_defaults(func=commands.cmd_profile)
