"""One runner per training / evaluation stage: read the stage's inputs, seed, build what it needs, call the pure
function that does the work, write the outputs. Shared by the CLI (bare and under torchrun), the Prefect flows,
the comparison and the search, so every entry point runs the same code.

One module per stage, so that each DVC stage's code dependencies (its import closure, :mod:`stsreg.infra.codehash`) hold
only what that stage runs: a change to the stage-2 objective does not make stage 1 or the evaluation stale.

``log_metric(key, value, step)`` receives metrics (an MLflow :class:`~stsreg.infra.tracking.MetricBuffer` in flows).

    stage1_runner.run_stage1  data/prepared/nli_train.parquet -> models/stage1
                              (training.stage1_training: the optional encoder step, then the head)
    stage2_runner.run_stage2  models/stage1 + data/prepared/sts.parquet -> models/stage2
                              (training.stage2_training.fine_tune)
    eval_runner.run_evaluate  a model folder or backbone -> reports/eval/
                              (sts_eval.score_pairs, sts_eval.task_metrics)
"""

#: The default ``log_metric``: drops every metric.
NOOP = lambda key, value, step: None  # noqa: E731
