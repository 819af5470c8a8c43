"""Which tables a run read, as MLflow datasets (``mlflow.data`` + ``log_inputs``): name, digest, rows and source.

A training run logs the train split of each table it trained on and the dev split it selected on (context
``training`` / ``validation``); an evaluation run logs each test table it scored (context ``evaluation``). The MLflow
UI lists them on the run's page ("Datasets used"), and two runs on the same rows show the same digest.

    log_tables(client, run_id, "data/prepared/sts.parquet", {"training": [("stsb", "train"), ...]})
"""

from __future__ import annotations

import warnings

from pathlib import Path

import pandas as pd

#: The columns that make a pair: the digest covers these, so a changed sentence or score changes it.
PAIR_COLUMNS = ["sentence1", "sentence2", "score"]


def table_datasets(sts: pd.DataFrame, wanted: dict[str, list[tuple[str, str]]], source: str) -> list:
    """``wanted``: context -> [(table, split)] -> MLflow ``DatasetInput`` entities (absent tables skipped)."""
    import mlflow.data
    from mlflow.entities import DatasetInput, InputTag

    inputs = []
    for context, pairs in wanted.items():
        for table, split in pairs:
            rows = sts[(sts.dataset == table) & (sts.split == split)][PAIR_COLUMNS].reset_index(drop=True)
            if rows.empty:
                continue
            with warnings.catch_warnings():  # MLflow registers its local-file source twice and warns on each table
                warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted in multiple "
                                                          "ways")
                ds = mlflow.data.from_pandas(rows, source=source, name=f"{table}/{split}", targets="score")
            inputs.append(DatasetInput(ds._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", context)]))
    return inputs


def log_tables(client, run_id: str, sts_path: str | Path, wanted: dict[str, list[tuple[str, str]]]) -> None:
    """Log the tables ``wanted`` (context -> [(table, split)]) of the prepared STS table at ``sts_path`` on
    ``run_id``."""
    sts = pd.read_parquet(sts_path, columns=["dataset", "split", *PAIR_COLUMNS])
    inputs = table_datasets(sts, wanted, Path(sts_path).as_posix())
    if inputs:
        client.log_inputs(run_id, datasets=inputs)
