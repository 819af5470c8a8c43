"""The served model: an MLflow pyfunc around a saved :class:`~stsreg.model.SiameseRegressor` folder.

Input: a DataFrame with string columns ``sentence1`` and ``sentence2`` (one row per pair).
Output: a DataFrame with ``cosine`` (cosine similarity of the embeddings, -1..1: the evaluation score) and
``score`` (the model's 0-5 similarity, :meth:`~stsreg.model.SiameseRegressor.predict`: the cosine map its stage 2
trained, ``clamp(a*cos+b, 0, 5)``, or the head's output for a head-trained model; ``make run`` reports its Spearman
and mean absolute error per task).

    mlflow models serve -m models:/sts-regression@champion --env-manager local --host 127.0.0.1
    curl -X POST 127.0.0.1:5000/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_records": [{"sentence1": "A man plays.", "sentence2": "A man is playing."}]}'
"""

from __future__ import annotations

import pandas as pd

import mlflow.pyfunc
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, Schema

COLUMNS = ("sentence1", "sentence2")
SIGNATURE = ModelSignature(inputs=Schema([ColSpec("string", c) for c in COLUMNS]),
                           outputs=Schema([ColSpec("double", "cosine"), ColSpec("double", "score")]))

EXAMPLE = pd.DataFrame({"sentence1": ["A man is playing a guitar."], "sentence2": ["Someone plays an instrument."]})


def _bad(message: str) -> MlflowException:
    return MlflowException(message, error_code=INVALID_PARAMETER_VALUE)  # -> HTTP 400 from the scoring server


def validate_pairs(frame, max_pairs: int) -> pd.DataFrame:
    """Check a request: a DataFrame with non-empty string ``sentence1``/``sentence2``, at most ``max_pairs`` rows."""
    if not isinstance(frame, pd.DataFrame):
        raise _bad(f"expected a table with columns {list(COLUMNS)}, got {type(frame).__name__}")
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise _bad(f"missing column(s) {missing}; send columns {list(COLUMNS)}")
    if len(frame) > max_pairs:
        raise _bad(f"{len(frame)} pairs in one request; the limit is {max_pairs} (split the batch)")
    for c in COLUMNS:
        bad = [i for i, x in enumerate(frame[c]) if not isinstance(x, str) or not x.strip()]
        if bad:
            raise _bad(f"column {c!r} must hold non-empty strings; bad rows (first 10): {bad[:10]}")
    return frame


class SentencePairModel(mlflow.pyfunc.PythonModel):
    """pyfunc: pairs -> cosine + head score. Artifact ``model``: a saved SiameseRegressor folder."""

    def __init__(self, max_pairs: int = 20000, batch_size: int = 64):
        self.max_pairs, self.batch_size = max_pairs, batch_size

    def load_context(self, context):
        from stsreg.model import SiameseRegressor

        self.model_dir = context.artifacts["model"]  # the saved model folder, for evaluation of a registered version
        self.model = SiameseRegressor.load(self.model_dir).eval()

    def predict(self, context, model_input, params=None):
        from stsreg.evaluate import score_pairs

        pairs = validate_pairs(model_input, self.max_pairs)
        if pairs.empty:
            return pd.DataFrame({"cosine": pd.Series(dtype=float), "score": pd.Series(dtype=float)})
        scored = score_pairs(self.model, pairs[list(COLUMNS)], self.batch_size, show_progress=False)
        return pd.DataFrame({"cosine": scored.cosine.astype(float), "score": scored.prediction.astype(float)}).reset_index(drop=True)
