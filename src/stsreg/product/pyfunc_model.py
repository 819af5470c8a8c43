"""The served model: an MLflow pyfunc around a saved :class:`~stsreg.product.model.SiameseRegressor` folder.

Input, one of two shapes:
- pairs: string columns ``sentence1`` and ``sentence2`` (one row per pair) -> a DataFrame with ``cosine`` (cosine
  similarity of the embeddings, -1..1: the evaluation score) and ``score`` (the model's 0-5 similarity,
  :meth:`~stsreg.product.model.SiameseRegressor.predict`: the cosine map its stage 2 trained, ``clamp(a*cos+b, 0, 5)``,
  or
  the head's output for a head-trained model; ``make run`` reports its Spearman and mean absolute error per task),
  mapped linearly to the served scale (model config ``scale``, ``serve.scale``; [0, 5] unless set);
- sentences: one string column ``sentence`` -> a DataFrame with ``embedding`` (the pooled sentence vector, a list
  of ``dim`` floats, not normalised: what sentence-transformers' ``encode`` gives).

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

from stsreg.infra.backend_specs import BY_NAME
from stsreg.infra.errors import InputError
from stsreg.infra.scales import from_internal, valid_scale
from stsreg.product.serving.protocol import PAIR, SENTENCE, Parsed, RequestError, from_rows

COLUMNS = PAIR
# every column optional: a request holds either the pair columns or the one sentence column (validate_request)
SIGNATURE = ModelSignature(inputs=Schema([ColSpec("string", c, required=False) for c in (*COLUMNS, SENTENCE)]))

EXAMPLE = pd.DataFrame({"sentence1": ["A man is playing a guitar."], "sentence2": ["Someone plays an instrument."]})


def _bad(message: str) -> MlflowException:
    return MlflowException(message, error_code=INVALID_PARAMETER_VALUE)  # -> HTTP 400 from the scoring server


def validate_request(frame, max_pairs: int) -> Parsed | None:
    """A request table checked by the server's own rule (:func:`stsreg.product.serving.protocol.from_rows`: pairs
    ``sentence1``/``sentence2`` or one column ``sentence``, non-empty strings, at most ``max_pairs`` rows), refusals
    raised as MLflow's 400; None for an empty table (answered with an empty one)."""
    if not isinstance(frame, pd.DataFrame):
        raise _bad(f"expected a table with columns {list(COLUMNS)} (or one column {SENTENCE!r}), got "
                   f"{type(frame).__name__}")
    if frame.empty:
        return None
    # a value a row lacks is NaN in the frame: None to the rule, as in a JSON row
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    try:
        return from_rows(rows, "rows", max_pairs)
    except RequestError as exc:
        raise _bad(exc.message) from None


class SentencePairModel(mlflow.pyfunc.PythonModel):
    """pyfunc: pairs -> cosine + score, sentences -> embeddings. Artifact ``model``: a saved SiameseRegressor folder."""

    def __init__(self, max_pairs: int = 20000, batch_size: int = 64):
        self.max_pairs, self.batch_size = max_pairs, batch_size

    def load_context(self, context):
        from stsreg.product.model import SiameseRegressor

        self.model_dir = context.artifacts["model"]  # the saved model folder, for evaluation of a registered version
        # precision (auto | fp32 | bf16): `mlflow.pyfunc.load_model(..., model_config={"precision": ...})`, as
        # `stsreg serve --precision` passes it; auto when absent (bf16 only where the hardware has it natively)
        config = getattr(context, "model_config", None) or {}
        precision = config.get("precision", "auto")
        self.scale = tuple(config.get("scale", (0.0, 5.0)))  # the served score's [lo, hi] (serve.scale at registration)
        self.model = SiameseRegressor.load(self.model_dir, precision=precision).eval()
        # the backend (serve.backend at registration; `stsreg serve --backend` resets it): versions logged before
        # backends existed hold no exports and run torch
        self.backend, self.rates, self._setting = "torch", {}, None
        self.set_backend(config.get("backend", "auto"), int(config.get("threads", 0)))

    def set_backend(self, backend: str, threads: int = 0) -> None:
        """Run the encoder on ``backend`` (torch | onnx | onnx-int8 | auto:
        :func:`stsreg.product.serving.export.choose`) with ``threads`` intra-op threads (0: the library's default). A
        backend the version may not serve (no export, or kept out by its quality at registration) is refused with the
        reason."""
        from stsreg.product.serving import export

        if (backend, threads) == self._setting:
            return  # already running it (auto: measured once)
        self._setting = (backend, threads)
        if backend == "auto":
            self.backend, self.rates = export.choose(self.model, self.model_dir, threads)
            return
        allowed = export.servable(self.model_dir)
        if backend not in allowed:
            verdict = export.read_quality(self.model_dir).get(backend, {})
            raise InputError(f"this version may not serve backend {backend!r}: "
                             f"{verdict.get('reason', 'no export of it in the registered model')} (it may serve: "
                             f"{', '.join(allowed)})")
        export.use_backend(self.model, backend, self.model_dir, threads)
        self.backend, self.rates = backend, {}

    def set_scale(self, lo: float, hi: float) -> None:
        """Give the served ``score`` on [lo, hi] from now on (the model's 0-5 score mapped linearly)."""
        if not valid_scale((lo, hi)):  # the one rule of a scale, as params.yaml's serve.scale is checked
            raise ValueError(f"a scale needs lo < hi, got [{lo}, {hi}]")
        self.scale = (float(lo), float(hi))

    def set_precision(self, precision: str) -> None:
        """Run the loaded model in ``precision`` (auto | fp32 | bf16) from now on (versions logged before the model
        config carried a precision take it this way). It is torch's setting: the ONNX backends compute in fp32."""
        if self.backend == "torch":
            self.model.precision = precision

    def serving_info(self) -> dict:
        """What the loaded model computes with: the precision setting, what it resolved to here, the device and the
        maximum sequence length (``stsreg serve`` prints it and answers it at ``GET /metadata``)."""
        from stsreg.product.precision import describe

        from stsreg.product.serving import export

        computed = BY_NAME[self.backend].computes or describe(self.model.amp_dtype)
        # auto: what each backend did here at start (sentences/s in batches, batch-1 p50 ms), the numbers its
        # explanation quotes (rounded once: a 5.145 ms quoted from the unrounded 5.1449 read 5.1 beside 5.15)
        measured = {b: {k: round(v, 2) for k, v in r.items()} for b, r in self.rates.items()}
        return {"precision_setting": self.model.precision, "precision": computed,
                "device": str(self.model.device), "max_length": self.model.config.max_length,
                "score_scale": list(self.scale), "backend": self.backend, "backends_measured": measured,
                **({"auto": {"chosen": self.backend, "why": export.explain(self.backend, measured)}}
                   if self._setting and self._setting[0] == "auto" else {}),
                "backends": export.read_quality(self.model_dir)}

    def predict(self, context, model_input, params=None):
        from stsreg.product.sts_eval import score_pairs

        parsed = validate_request(model_input, self.max_pairs)
        if parsed is not None and parsed.kind == "sentences":
            vectors = self.model.encode(parsed.first, self.batch_size, show_progress=False)
            return pd.DataFrame({"embedding": [v.tolist() for v in vectors.float()]})
        if parsed is None:
            return pd.DataFrame({"cosine": pd.Series(dtype=float), "score": pd.Series(dtype=float)})
        pairs = pd.DataFrame({"sentence1": parsed.first, "sentence2": parsed.second})
        scored = score_pairs(self.model, pairs, self.batch_size, show_progress=False)
        score = from_internal(scored.prediction.astype(float), self.scale)
        return pd.DataFrame({"cosine": scored.cosine.astype(float), "score": score}).reset_index(drop=True)
