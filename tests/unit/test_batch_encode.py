"""`stsreg encode` as a user types it: every input format, each distinct sentence once, input order kept, a killed run
resumed without re-encoding its finished chunks and giving the output of an uninterrupted run, refusals that write
nothing."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from stsreg.product.model import SiameseRegressor
from tests.conftest import TINY_WORDS
from tests.helpers.backbones import exported_model, random_sentences
from tests.helpers.doc_commands import ENCODE

STSREG = os.path.join(os.path.dirname(sys.executable), "stsreg")


def _env():
    return {"HOME": os.environ.get("HOME", "/tmp"), "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
            "HF_HUB_OFFLINE": "1", "STSREG_USE_SERVERS": "0", "MLFLOW_TRACKING_URI": "sqlite:///unused.db"}


def _stsreg(*args, cwd, **kw):
    return subprocess.run([STSREG, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def model_dir(tiny_backbone, tmp_path_factory):
    """A stsreg model folder of the tiny BERT with its ONNX exports (what registration adds)."""
    return exported_model(tiny_backbone, tmp_path_factory.mktemp("encode-model") / "model", 16)


def _sentences(n, seed=0):
    return random_sentences(TINY_WORDS, n, seed, 3, 12)


def test_formats_dedupe_and_order(model_dir, tmp_path):
    sentences = _sentences(40) + _sentences(10)  # the last 10 repeat the first 10
    (tmp_path / "corpus.txt").write_text("\n".join(sentences) + "\n")
    pd.DataFrame({"id": range(50), "body": sentences}).to_json(tmp_path / "corpus.jsonl", orient="records", lines=True)
    pd.DataFrame({"id": range(50), "text": sentences}).to_csv(tmp_path / "corpus.csv", index=False)
    pd.DataFrame({"sentence": sentences}).to_parquet(tmp_path / "corpus.parquet")
    reference = SiameseRegressor.load(model_dir).encode(sentences, show_progress=False).numpy()
    # what the ONNX backend computes: fp32 (precision auto may take bf16 in torch on a CPU with native bf16)
    fp32 = SiameseRegressor.load(model_dir, precision="fp32").encode(sentences, show_progress=False).numpy()

    done = _stsreg("encode", "corpus.txt", "--out", "txt.npy", "--model", str(model_dir), "--backend", "torch",
                   "--chunk-size", "7", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "50 rows x 32 (40 distinct sentences encoded)" in done.stdout
    np.testing.assert_allclose(np.load(tmp_path / "txt.npy"), reference, atol=1e-5)
    assert not (tmp_path / "txt.npy.parts").exists()  # the parts go once the output is whole
    for corpus, extra in (("corpus.jsonl", ["--column", "body"]), ("corpus.csv", []), ("corpus.parquet", [])):
        out = corpus.replace(".", "-") + ".parquet"
        done = _stsreg("encode", corpus, "--out", out, "--model", str(model_dir), "--backend", "onnx", *extra,
                       cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        table = pd.read_parquet(tmp_path / out)
        assert len(table) == 50 and "embedding" in table and (corpus == "corpus.parquet"
                                                              or list(table.id.astype(int)) == list(range(50)))
        np.testing.assert_allclose(np.stack(table.embedding), fp32, atol=1e-4)  # ONNX fp32 = torch fp32


def test_refusals_name_the_problem_and_write_nothing(model_dir, tmp_path):
    pd.DataFrame({"a": ["x"], "b": ["y"]}).to_csv(tmp_path / "two.csv", index=False)
    for args, message in ((["two.csv", "--out", "o.npy"], "name the text column with --column"),
                          (["two.csv", "--out", "o.npy", "--column", "c"], "no column 'c'"),
                          (["two.csv", "--out", "o.csv", "--column", "a"], "must end in .parquet or .npy"),
                          (["nope.txt", "--out", "o.npy"], "no such file")):
        done = _stsreg("encode", *args, "--model", str(model_dir), cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr[-1000:])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two.csv"]


def test_a_killed_run_resumes_without_re_encoding_and_equals_an_uninterrupted_one(model_dir, tmp_path):
    sentences = _sentences(30_000, seed=1)
    (tmp_path / "big.txt").write_text("\n".join(sentences) + "\n")
    common = ["--model", str(model_dir), "--backend", "onnx-int8", "--chunk-size", "500", "--threads", "1"]
    whole = _stsreg("encode", "big.txt", "--out", "whole.npy", *common, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]

    proc = subprocess.Popen([STSREG, "encode", "big.txt", "--out", "resumed.npy", *common], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    parts = tmp_path / "resumed.npy.parts"
    deadline = time.time() + 300
    while len(list(parts.glob("chunk-*.npy"))) < 3:
        assert proc.poll() is None and time.time() < deadline, "the run ended before it could be killed"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in parts.glob("chunk-*.npy")}
    assert 3 <= len(finished) < 60 and not (tmp_path / "resumed.npy").exists()
    manifest = json.loads((parts / "manifest.json").read_text())
    assert manifest["backend"] == "onnx-int8" and manifest["n_unique"] == len(set(sentences))

    # the chunks it finished are kept as they are: watch them while the rerun works
    rerun = subprocess.Popen([STSREG, "encode", "big.txt", "--out", "resumed.npy", *common], cwd=tmp_path, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = {}
    while rerun.poll() is None:
        for p in list(parts.glob("chunk-*.npy")):
            try:
                seen.setdefault(p.name, p.stat().st_mtime_ns)
            except FileNotFoundError:
                pass
        time.sleep(0.01)
    out, err = rerun.communicate()
    assert rerun.returncode == 0, err[-2000:]
    assert f"{len(finished)} chunk(s) found done" in out
    assert all(seen.get(name, mtime) == mtime for name, mtime in finished.items())
    np.testing.assert_array_equal(np.load(tmp_path / "resumed.npy"), np.load(tmp_path / "whole.npy"))

    # parts of another job are never mixed in: a different model is refused, --fresh starts over
    (tmp_path / "other.npy.parts").mkdir()
    (tmp_path / "other.npy.parts/manifest.json").write_text(json.dumps({**manifest, "model": "another"}))
    done = _stsreg("encode", "big.txt", "--out", "other.npy", *common, cwd=tmp_path)
    assert done.returncode == 2 and "holds chunks of another job (model differ)" in done.stderr
    done = _stsreg("encode", "big.txt", "--out", "other.npy", *common, "--fresh", cwd=tmp_path)
    assert done.returncode == 0 and np.array_equal(np.load(tmp_path / "other.npy"), np.load(tmp_path / "whole.npy"))


def test_the_documented_command_as_typed(model_dir, tmp_path):
    """docs/inference.md's and the README's command, typed as printed in a project folder holding models/stage2."""
    import shlex
    import shutil

    shutil.copytree(model_dir, tmp_path / "models/stage2")
    sentences = _sentences(25, seed=3)
    (tmp_path / "corpus.txt").write_text("\n".join(sentences) + "\n")
    words = shlex.split(ENCODE)
    assert words[0] == "stsreg"
    done = _stsreg(*words[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = SiameseRegressor.load(model_dir).encode(sentences, show_progress=False).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "corpus.npy"), reference, atol=1e-4)  # auto: torch or ONNX fp32


def test_unreadable_empty_and_long_lines_are_reported_not_fatal(model_dir, tmp_path):
    """A text file with one line of invalid UTF-8 used to end in a traceback with nothing written; empty lines and
    lines cut at the maximum length passed without a word."""
    sentences = _sentences(12, seed=4)
    long = " ".join(TINY_WORDS * 10)  # far beyond the model's 16 tokens
    body = (
        "\n".join(sentences[:5]).encode()
        + b"\nbad \xff\xfe bytes\n\n"
        + "\n".join(sentences[5:] + [long]).encode()
        + b"\n"
    )
    (tmp_path / "corpus.txt").write_bytes(body)
    done = _stsreg("encode", "corpus.txt", "--out", "out.parquet", "--model", str(model_dir), "--backend", "torch",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 line(s) could not be read" in done.stdout and "line 6: not valid UTF-8" in done.stdout
    assert "1 row(s) are empty" in done.stdout and "1 distinct sentence(s) are longer than 16 tokens" in done.stdout
    table = pd.read_parquet(tmp_path / "out.parquet")
    assert table.line.tolist() == [1, 2, 3, 4, 5, 7, *range(8, 16)] and table.text.iloc[5] == ""
    rejected = pd.read_parquet(tmp_path / "out.parquet.rejected.parquet")
    assert rejected.line.tolist() == [6] and "bad" in rejected.raw.iloc[0]


def test_auto_resumes_on_the_backend_the_unfinished_job_ran(model_dir, tmp_path):
    """A resume never depends on a timing: `--backend auto` on an unfinished job takes the backend it ran (here torch,
    which `auto` would not choose on a CPU), instead of measuring again and refusing the job as another's."""
    from stsreg.product.serving.batch_encode import EncodeSpec, Job, load_model, resumed_backend

    (tmp_path / "s.txt").write_text("\n".join(_sentences(300, seed=4)) + "\n")
    model, backend, identity = load_model(str(model_dir), "torch", threads=1)
    job = Job(EncodeSpec(corpus=str(tmp_path / "s.txt"), out=str(tmp_path / "s.npy"), chunk_size=100), model, identity,
              backend)
    job.prepare()
    job.run_chunk(0)  # one chunk done, then the run stops
    assert resumed_backend(tmp_path / "s.npy", "auto") == "torch"
    assert resumed_backend(tmp_path / "s.npy", "onnx") == "onnx"  # a named backend is used as given
    assert resumed_backend(tmp_path / "x.npy", "auto") == "auto"  # nothing to resume: auto measures
    rerun = _stsreg("encode", "s.txt", "--out", "s.npy", "--model", str(model_dir), "--backend", "auto",
                    "--chunk-size", "100", "--threads", "1", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"with {model_dir} on torch," in rerun.stdout and "1 chunk(s) found done" in rerun.stdout
