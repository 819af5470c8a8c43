"""Batch embedding of a corpus: ``stsreg encode INPUT --out OUT``, chunked, resumable, each distinct sentence once.

Input: a text file (one sentence per line), or a CSV, TSV, JSONL or Parquet table (read as
:func:`stsreg.product.corpus.read_corpus`; tables as :func:`stsreg.product.data.user_tables.read_frame` reads yours) and
its text column. Output, in input order:

- ``.parquet``: the input's columns (a text file: ``text``; CSV/TSV columns as text, as your tables are read) plus
  ``embedding``, a list of ``d`` float32 per row;
- ``.npy``: an (n, d) float32 array, row i the embedding of input row i.

How it works, so that a kill costs at most one chunk: the distinct sentences (first occurrence order) are cut into
chunks of ``chunk_size``; chunk i is encoded into ``<OUT>.parts/chunk-<i>.npy`` (written to a temporary name, then
renamed: a file there is complete); ``<OUT>.parts/manifest.json`` pins what the chunks were made from (the input's
sha256, the column, the model, the resolved backend, the maximum length, the chunk size). A rerun with the same
manifest encodes only the chunks missing; a different one is refused unless ``fresh`` (then the parts are discarded).
When every chunk exists, the output is assembled, written atomically, and the parts removed. Chunks are independent:
:mod:`pipelines.product.encode_flow` runs them on several Prefect workers sharing the parts folder.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from stsreg.infra import atomic, tracking
from stsreg.infra import progress as progress_bar
from stsreg.infra.errors import InputError
from stsreg.infra.hashing import sha256_file
from stsreg.product.corpus import read_corpus
from stsreg.product.serving.model_uri import resolve

log = logging.getLogger(__name__)

OUTPUTS = (".parquet", ".npy")


@dataclass(frozen=True)
class Manifest:
    """What a parts folder's chunks were made from; a resumed run must match it field for field."""

    input_sha256: str
    column: str
    model: str
    backend: str
    max_length: int
    chunk_size: int
    n_unique: int
    dim: int


class EncodeSpec(BaseModel):
    """What to embed, with what: ``stsreg encode``'s arguments, and the one parameter the Prefect flows pass whole.

    ``corpus``: the input file; ``out``: the output (.parquet or .npy); ``model``: a registered model URI, a folder
    written by stsreg or a backbone (:func:`load_model`); ``backend``: the one asked for (``auto``: the fastest measured
    here of those the model may run); ``column``: a table's text column (None: text, sentence or sentence1);
    ``chunk_size``: distinct sentences per chunk (the unit of resuming); ``batch_size``: sentences per forward pass;
    ``threads``: intra-op threads (0: all cores)."""

    model_config = ConfigDict(frozen=True)

    corpus: str
    out: str
    model: str = "models:/sts-regression@champion"
    backend: str = "auto"
    column: str | None = None
    chunk_size: int = 10_000
    batch_size: int = 64
    threads: int = 0


class Job:
    """One corpus, one model, one parts folder: :meth:`run_chunk` encodes chunk i, :meth:`assemble` writes the output.

    ``spec``: what to embed; ``model``: a loaded :class:`~stsreg.product.model.SiameseRegressor` already on its backend
    (``backend`` names it), ``model_id`` what identifies its weights (:func:`load_model`; :meth:`load` does both).
    """

    def __init__(self, spec: EncodeSpec, model, model_id: str, backend: str):
        corpus, out, column, chunk_size = Path(spec.corpus), Path(spec.out), spec.column, spec.chunk_size
        if out.suffix.lower() not in OUTPUTS:
            raise InputError(f"{out}: the output must end in {' or '.join(OUTPUTS)}")
        if chunk_size < 1:
            raise InputError(f"chunk size must be >= 1, got {chunk_size}")
        self.corpus, self.out, self.model, self.batch_size = corpus, out, model, spec.batch_size
        self.frame, column, self.rejects = read_corpus(corpus, column)
        texts = self.frame[column].tolist()
        self.empty = sum(1 for t in texts if not t.strip())
        self.unique = list(dict.fromkeys(texts))  # each distinct sentence encoded once
        position = {s: i for i, s in enumerate(self.unique)}
        self.rows = np.fromiter((position[s] for s in texts), dtype=np.int64, count=len(texts))
        self.parts = out.with_name(out.name + ".parts")
        self.manifest = Manifest(sha256_file(corpus), column, model_id, backend, model.config.max_length, chunk_size,
                                 len(self.unique), model.dim)

    @classmethod
    def load(cls, spec: EncodeSpec, fresh: bool = False) -> Job:
        """The job of ``spec`` with its model loaded on its backend (``auto`` resuming an unfinished job takes the
        backend that job ran, :func:`resumed_backend`)."""
        wanted = resumed_backend(Path(spec.out), spec.backend, fresh)
        model, backend, model_id = load_model(spec.model, wanted, spec.threads)
        return cls(spec, model, model_id, backend)

    @property
    def n_chunks(self) -> int:
        return -(-len(self.unique) // self.manifest.chunk_size)

    def chunk_path(self, i: int) -> Path:
        return self.parts / f"chunk-{i:06d}.npy"

    def prepare(self, fresh: bool = False) -> list[int]:
        """Create or check the parts folder; the chunks still to encode."""
        path = self.parts / "manifest.json"
        if path.is_file() and not fresh:
            try:
                self.attach()
            except InputError as exc:
                raise InputError(f"{exc}; rerun with --fresh to discard them, or choose another --out") from None
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
            self.parts.mkdir(parents=True)
            atomic.write_text(path, json.dumps(asdict(self.manifest), indent=2))
        return [i for i in range(self.n_chunks) if not self.chunk_path(i).is_file()]

    def attach(self) -> None:
        """Join a job another process prepared (:meth:`prepare`): its manifest must be this job's."""
        path = self.parts / "manifest.json"
        if not path.is_file():
            raise InputError(f"{self.parts} has no manifest: the job was not prepared (run the stsreg-encode flow)")
        found = Manifest(**json.loads(path.read_text()))
        if found != self.manifest:
            changed = [k for k, v in asdict(found).items() if asdict(self.manifest)[k] != v]
            raise InputError(f"{self.parts} holds chunks of another job ({', '.join(changed)} differ)")

    def run_chunk(self, i: int) -> Path:
        """Encode chunk ``i`` into its file (complete or absent: written beside, then renamed)."""
        size = self.manifest.chunk_size
        vectors = self.model.encode(self.unique[i * size:(i + 1) * size], self.batch_size, show_progress=False)
        _save_npy(vectors.numpy().astype(np.float32), self.chunk_path(i))
        return self.chunk_path(i)

    def assemble(self) -> Path:
        """The output from the chunks, in input order (duplicates get their sentence's vector); the parts removed."""
        missing = [i for i in range(self.n_chunks) if not self.chunk_path(i).is_file()]
        if missing:
            raise InputError(f"{self.parts}: chunks {missing[:10]} are not encoded yet")
        unique = np.concatenate([np.load(self.chunk_path(i)) for i in range(self.n_chunks)]) if self.n_chunks else \
            np.zeros((0, self.manifest.dim), np.float32)
        vectors = unique[self.rows]
        if self.out.suffix.lower() == ".npy":
            _save_npy(vectors, self.out)
        else:
            atomic.to_parquet(self.frame.assign(embedding=list(vectors)), self.out)
        shutil.rmtree(self.parts)
        return self.out

    @property
    def rejected_path(self) -> Path:
        return self.out.with_name(self.out.name + ".rejected.parquet")

    def truncated(self) -> int:
        """Distinct sentences longer than the model's maximum length (their tail is not encoded)."""
        limit, n = self.manifest.max_length, 0
        for i in range(0, len(self.unique), 4096):
            ids = self.model.tokenizer(self.unique[i:i + 4096], add_special_tokens=True, truncation=False)["input_ids"]
            n += sum(len(x) > limit for x in ids)
        return n

    def summary(self, resumed_chunks: int) -> dict:
        """What a finished job wrote: the output, rows, distinct sentences, chunks (``resumed_chunks`` of them found
        done), the dimension and the backend; records rejected (kept in :attr:`rejected_path`), empty rows and
        sentences cut at the maximum length."""
        return {"out": str(self.out), "rows": len(self.rows), "unique": len(self.unique), "chunks": self.n_chunks,
                "resumed_chunks": resumed_chunks, "dim": self.manifest.dim, "backend": self.manifest.backend,
                "rejected": len(self.rejects), "empty": self.empty, "truncated": self.truncated(),
                "max_length": self.manifest.max_length}

    def write_rejects(self) -> None:
        """The records that could not be read, with line, reason and raw text (none: no file, an old one removed)."""
        if self.rejects:
            atomic.to_parquet(pd.DataFrame(self.rejects, columns=["line", "reason", "raw"]), self.rejected_path)
        else:
            self.rejected_path.unlink(missing_ok=True)


def _save_npy(array: np.ndarray, path: Path) -> None:
    """``array`` to ``path`` as .npy, whole or not at all (:func:`stsreg.infra.atomic.replace_file`)."""
    with atomic.replace_file(path) as tmp, open(tmp, "wb") as f:
        np.save(f, array)


def encode_corpus(job: Job, fresh: bool = False, progress: bool | None = None) -> dict:
    """Run every missing chunk of ``job`` here (a progress bar over sentences), then assemble. Returns a summary."""
    todo = job.prepare(fresh)
    size = job.manifest.chunk_size
    done = job.n_chunks - len(todo)
    with progress_bar.bar(total=len(job.unique), initial=min(done * size, len(job.unique)) if done else 0,
                          unit="sentence",
                          desc="encode", enabled=progress) as bar:
        for i in todo:
            job.run_chunk(i)
            bar.update(min(size, len(job.unique) - i * size))
    job.assemble()
    job.write_rejects()
    return job.summary(done)


def resumed_backend(out: Path, backend: str, fresh: bool = False) -> str:
    """The backend a run into ``out`` uses: ``auto`` resuming an unfinished job (``OUT.parts/manifest.json``) takes
    the backend that job ran, so that a resume never depends on a timing measured again on a busy machine; a named
    backend, or ``--fresh``, is used as given."""
    manifest = Path(str(out) + ".parts") / "manifest.json"
    if backend != "auto" or fresh or not manifest.is_file():
        return backend
    return json.loads(manifest.read_text()).get("backend", backend)


def load_model(model: str, backend: str = "auto", threads: int = 0, tracking_uri: str | None = None,
               dst: Path | None = None):
    """``model`` -> (a loaded model on its backend, the backend it runs, its identity: the sha256 of its weights, or
    the backbone's name). A registered model URI
    (``models:/name@alias``, ``models:/name/3``, ``runs:/...``) is downloaded from the registry into ``dst``; a folder
    written by stsreg is loaded as it is; any other name or path is a backbone (untrained head; torch)."""
    from stsreg.product.serving import export
    from stsreg.product.model import SiameseRegressor

    if model.startswith(("models:/", "runs:/")):
        import mlflow.artifacts


        uri = tracking_uri or tracking.tracking_uri()
        local = Path(
            mlflow.artifacts.download_artifacts(
                artifact_uri=resolve(model, uri),
                tracking_uri=uri,
                dst_path=str(dst or tempfile.mkdtemp(prefix="stsreg-encode-")),
            )
        )
        folders = [p.parent for p in (local / "artifacts").glob("*/stsreg_model.json")]
        if len(folders) != 1:
            raise InputError(f"{model}: not a stsreg model (no model folder in its artifacts)")
        folder = folders[0]
    elif (Path(model) / "stsreg_model.json").is_file():
        folder = Path(model)
    else:
        loaded = SiameseRegressor.from_pretrained(model).eval()
        if backend not in ("auto", "torch"):
            raise InputError(f"{model} is a backbone, not a registered model: it has no {backend} export")
        return export.use_backend(loaded, "torch", model, threads), "torch", model
    loaded = SiameseRegressor.load(folder).eval()
    identity = sha256_file(folder / "model.safetensors")
    if backend == "auto":
        return loaded, export.choose(loaded, folder, threads)[0], identity
    quality = export.read_quality(folder)
    allowed = export.servable(folder, unjudged=True)
    if backend not in allowed:
        reason = quality.get(backend, {}).get("reason", "no export of it in the folder")
        raise InputError(f"{model} may not run backend {backend!r}: {reason} (it may: {', '.join(allowed)})")
    return export.use_backend(loaded, backend, folder, threads), backend, identity
