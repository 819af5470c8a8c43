"""Stage 2 on a tiny random BERT: learning happens, layer-wise lr groups, kill -9 + resume = uninterrupted."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

from stsreg.infra.config import Stage2Params
from stsreg.product.model import SiameseRegressor
from stsreg.product.optim import param_groups
from tests.helpers.training import fine_tune_params as fine_tune
from tests.conftest import REPO, tiny_sts
from tests.helpers.weights import weights


def test_param_groups_layer_decay_and_no_decay(tiny_backbone):
    model = SiameseRegressor.from_pretrained(tiny_backbone)
    groups = param_groups(model, lr=1.0, weight_decay=0.01, layer_decay=0.5)
    by_depth = {(g["depth"], g["weight_decay"] > 0): g["lr"] for g in groups}
    # 2 layers: embeddings depth 0 -> 0.5^3, layer 0 -> 0.5^2, layer 1 -> 0.5, head/pooler -> 1
    assert by_depth[(0, True)] == 0.125 and by_depth[(1, True)] == 0.25 and by_depth[(2, True)] == 0.5
    assert by_depth[(3, True)] == 1.0
    head_bias = next(g for g in groups if any(p is model.head.bias for p in g["params"]))
    assert head_bias["weight_decay"] == 0.0
    n = sum(len(g["params"]) for g in groups)
    assert n == len([p for p in model.parameters() if p.requires_grad])


def test_fine_tune_improves_dev_and_keeps_best(tiny_backbone, tmp_path):
    torch.manual_seed(0)  # the head's initialisation draws from the global RNG: independent of earlier tests
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)
    p = Stage2Params(batch_size=8, epochs=2, eval_every=10, checkpoint_every_s=0, lr=1e-3, warmup_ratio=0.1)
    summary = fine_tune(model, tiny_sts(200), tiny_sts(60, seed=1), p, seed=3, out_dir=tmp_path / "out",
                        ckpt_dir=tmp_path / "ckpt", device=torch.device("cpu"))
    curve = dict((int(s), v) for s, v in summary["dev_curve"])
    assert summary["steps"] == 50 and 0 in curve and 50 in curve
    assert summary["best_dev_spearman"] == max(curve.values()) > curve[0]
    assert json.loads((tmp_path / "out/training_summary.json").read_text())["best_step"] == summary["best_step"]
    reloaded = SiameseRegressor.load(tmp_path / "out")
    from stsreg.product.sts_eval import spearman_cosine
    dev = tiny_sts(60, seed=1)
    assert spearman_cosine(reloaded, dev.sentence1, dev.sentence2,
                           dev.score) == pytest.approx(summary["best_dev_spearman"], abs=1e-4)


@pytest.mark.parametrize("keep", ["best", "trained"])
def test_keep_trained_never_hands_back_the_start_and_best_keeps_the_guard(tiny_backbone, tmp_path, keep):
    """A learning rate that wrecks the encoder: the guard (keep=best) hands back the start, keep=trained the best
    checkpoint after step 0 (what the method trained, as the comparison reports it); both numbers are reported."""
    from stsreg.product.sts_eval import spearman_cosine

    torch.manual_seed(0)
    train, dev = tiny_sts(200), tiny_sts(60, seed=1)
    trained = fine_tune(SiameseRegressor.from_pretrained(tiny_backbone, max_length=16), train, dev,
                        Stage2Params(batch_size=8, epochs=1, eval_every=5, checkpoint_every_s=3600, lr=1e-3,
                                     warmup_ratio=0.1),
                        seed=3, out_dir=tmp_path / "ok", ckpt_dir=tmp_path / "ck0", device=torch.device("cpu"))
    torch.manual_seed(0)
    wrecked = fine_tune(SiameseRegressor.load(tmp_path / "ok"), train, dev,
                        Stage2Params(batch_size=8, epochs=1, eval_every=5, checkpoint_every_s=3600, lr=0.5,
                                     warmup_ratio=0.0,
                                     max_grad_norm=100.0),
                        seed=3, out_dir=tmp_path / "out", ckpt_dir=tmp_path / "ck", device=torch.device("cpu"),
                        keep=keep)
    curve = dict((int(s), v) for s, v in wrecked["dev_curve"])
    assert wrecked["start_dev_spearman"] == curve[0] == pytest.approx(trained["best_dev_spearman"], abs=1e-4)
    assert wrecked["best_step"] == 0 and wrecked["best_dev_spearman"] == curve[0]  # nothing beat the start
    assert wrecked["trained_best_step"] > 0 and wrecked["trained_best_dev_spearman"] == max(v for s, v in curve.items()
                                                                                            if s > 0)
    assert wrecked["trained_best_dev_spearman"] < curve[0] and wrecked["kept"] == keep
    expected = wrecked["best_dev_spearman"] if keep == "best" else wrecked["trained_best_dev_spearman"]
    out = SiameseRegressor.load(tmp_path / "out")
    assert spearman_cosine(out, dev.sentence1, dev.sentence2, dev.score) == pytest.approx(expected, abs=1e-4)


def _run(backbone, work, env):
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.run_stage2", backbone, str(work)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_kill_9_then_resume_matches_uninterrupted(tiny_backbone, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ref = _run(tiny_backbone, tmp_path / "ref", env)
    _, err = ref.communicate(timeout=600)
    assert ref.returncode == 0, err.decode()[-2000:]

    work = tmp_path / "crash"
    proc = _run(tiny_backbone, work, env)
    ckpt = work / "ckpt/last.pt"
    deadline = time.time() + 300
    step = 0
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists():
            try:
                step = torch.load(ckpt, weights_only=False)["state"]["step"]
            except Exception:  # being replaced right now; os.replace makes that brief
                step = 0
            if step >= 30:
                break
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (work / "out").exists()
    # on a loaded machine one more checkpoint may land between reading `step` and the kill: resume from the file
    step = torch.load(ckpt, weights_only=False)["state"]["step"]
    assert step >= 30

    resumed = _run(tiny_backbone, work, env)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err.decode()[-2000:]
    assert f"resuming stage 2 from step {step}" in err.decode()
    a, b = weights(tmp_path / "ref/out"), weights(work / "out")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    sa = json.loads((tmp_path / "ref/summary.json").read_text())
    sb = json.loads((work / "summary.json").read_text())
    assert sa["dev_curve"] == sb["dev_curve"] and sa["best_step"] == sb["best_step"]
    # the open loss window travels in the checkpoint (every 3 steps, windows of 25): the same curve, bit for bit
    assert [s for s, _ in sa["loss_curve"]] == [25, 50, 75, 80] and sa["loss_curve"] == sb["loss_curve"]


def test_length_grouped_batches_keep_every_pair_and_pad_less():
    import random

    from stsreg.product.training.batches import length_grouped

    rng = random.Random(0)
    lengths = [rng.randint(5, 120) for _ in range(1000)]
    order = list(range(1000))
    rng.shuffle(order)
    grouped = length_grouped(order, lengths, batch_size=16, seed=3, window=10)
    assert sorted(i for b in grouped for i in b) == list(range(1000)) and len(grouped) == 63
    padded = lambda batches: sum(len(b) * max(lengths[i] for i in b) for b in batches)  # noqa: E731
    random_batches = [order[i:i + 16] for i in range(0, 1000, 16)]
    assert padded(grouped) < 0.7 * padded(random_batches)
    assert grouped == length_grouped(order, lengths, 16, seed=3, window=10)  # deterministic: resumable mid-epoch
    assert grouped != length_grouped(order, lengths, 16, seed=4, window=10)


@pytest.mark.parametrize("loss, head_trains", [("smooth_k2_cos", False), ("joint_smooth_k2", True)])
def test_cosine_buffer_objectives_train_the_encoder(tiny_backbone, tmp_path, loss, head_trains):
    from stsreg.product.sts_eval import spearman_cosine

    torch.manual_seed(0)
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)
    head0 = model.head.weight.detach().clone()
    p = Stage2Params(loss=loss, x0=0.2, k=1.0, batch_size=8, epochs=2, eval_every=100, checkpoint_every_s=3600, lr=1e-3,
                     warmup_ratio=0.1)
    dev = tiny_sts(60, seed=1)
    summary = fine_tune(model, tiny_sts(200), dev, p, seed=3, out_dir=tmp_path / "out", ckpt_dir=tmp_path / "ck",
                        device=torch.device("cpu"), keep="trained")
    assert summary["trained_best_dev_spearman"] > summary["start_dev_spearman"] + 5  # the cosine itself learned
    out = SiameseRegressor.load(tmp_path / "out")
    assert spearman_cosine(out, dev.sentence1, dev.sentence2,
                           dev.score) == pytest.approx(summary["trained_best_dev_spearman"], abs=1e-4)
    assert (not torch.equal(out.head.weight, head0)) == head_trains  # cosine-only objectives leave the head alone
    # the saved model serves the map its objective trained: clamp(5*cos + 0, 0, 5)
    assert out.config.score_map == [5.0, 0.0]
    u, v = out.encode(dev.sentence1.tolist()[:8]), out.encode(dev.sentence2.tolist()[:8])
    expected = (5 * torch.nn.functional.cosine_similarity(u, v)).clamp(0, 5)
    assert torch.allclose(out.predict(u, v), expected, atol=1e-6)


def test_label_modes_truncate_is_not_rounding():
    from stsreg.product.training.batches import adjust_labels

    y = torch.tensor([0.0, 0.4, 2.5, 3.8, 4.999, 5.0])
    assert adjust_labels(y, "raw").tolist() == y.tolist()
    assert adjust_labels(y, "truncate").tolist() == [0.0, 0.0, 2.0, 3.0, 4.0, 5.0]  # int(score), as the authors
    assert adjust_labels(y, "round").tolist() == [0.0, 0.0, 2.0, 4.0, 5.0, 5.0]  # halves to even
    with pytest.raises(ValueError):
        adjust_labels(y, "floor")


def test_a_head_trained_model_serves_its_head(tiny_backbone):
    model = SiameseRegressor.from_pretrained(tiny_backbone, max_length=16)
    u, v = torch.randn(4, model.dim), torch.randn(4, model.dim)
    assert model.config.score_map is None and torch.equal(model.predict(u, v), model.score_embeddings(u, v))


def test_train_fresh_discards_only_stage2_checkpoints_and_never_under_torchrun(tmp_path, monkeypatch):
    from stsreg.cli import build_parser
    from stsreg.commands.train import _discard_checkpoints, cmd_train

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "last.pt").write_bytes(b"a finished run")
    parse = lambda stage: build_parser().parse_args(["train", "--stage", stage, "--fresh", "--checkpoints", str(ckpt)])
    with pytest.raises(SystemExit, match="applies to stage 2"):
        cmd_train(parse("1"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match="not taken under torchrun"):
        cmd_train(parse("2"))
    assert (ckpt / "last.pt").read_bytes() == b"a finished run"  # refused before anything was touched
    assert build_parser().parse_args(["train", "--stage", "2"]).fresh is False  # resuming stays the default
    _discard_checkpoints("2", ckpt, world_size=1)
    assert not ckpt.exists()
    _discard_checkpoints("2", ckpt, world_size=1)  # nothing to remove is fine


def test_a_change_to_the_loops_code_restarts_from_step_0_and_says_why(tiny_backbone, tmp_path):
    """A finished checkpoint is resumed by the same code; after a function of the loop's closure changes (here in a
    copy of the package, as after a fix to the loss), the rerun starts from step 0 instead of handing back old
    weights."""
    import shutil

    code = tmp_path / "code"
    shutil.copytree(REPO / "src/stsreg", code / "stsreg", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{REPO}"}
    work = tmp_path / "work"

    def run() -> str:
        proc = subprocess.run([sys.executable, "-m", "tests.helpers.run_stage2", tiny_backbone, str(work), "48"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout + proc.stderr

    where = subprocess.run(
        [sys.executable, "-c", "import stsreg.product.losses; print(stsreg.product.losses.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where == str(code / "stsreg/product/losses.py")  # the runs below use the copy
    assert "resuming" not in run()
    assert "resuming stage 2 from step 12" in run()  # the finished run's checkpoint, same code: nothing to redo
    losses = code / "stsreg/product/losses.py"
    text = losses.read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def _buffer("))
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(":"))  # the signature's last line
    lines.insert(end + 1, "    pred = pred + 0  # a fix to the loss")
    losses.write_text("\n".join(lines) + "\n")
    out = run()
    assert "starting from step 0: checkpoint" in out and "was made with other code" in out
    assert "resuming stage 2" not in out


def test_a_nan_dev_score_never_keeps_a_checkpoint(tmp_path, monkeypatch):
    """A dev evaluation that is NaN (constant predictions, NaN labels) is never a candidate, not even the first one; a
    run whose every evaluation is NaN keeps no model and says so instead of writing one."""
    import math

    from stsreg.infra.errors import InputError
    from stsreg.product.training import selection

    class Model:
        def save(self, folder):
            (folder / "w").write_text("saved")

    for keep in ("best", "trained"):
        scores = iter([math.nan, math.nan, 40.0, math.nan])
        monkeypatch.setattr(selection, "spearman_cosine", lambda *a, **k: next(scores))
        dirs = {"best": tmp_path / keep / "best", "trained": tmp_path / keep / "trained"}
        dev = pd.DataFrame({"sentence1": ["a"], "sentence2": ["b"], "score": [1.0]})
        select = selection.DevSelector(Model(), dev, 8, keep, dirs)
        select(0)
        select(1)
        assert not dirs[keep].exists()
        with pytest.raises(InputError, match="every dev evaluation was NaN"):
            select.kept_dir
        select(2)
        select(3)
        assert select.kept_dir == dirs[keep] and (dirs[keep] / "w").exists()
        assert select.summary()["best_dev_spearman"] == 40.0 and select.summary()["best_step"] == 2
