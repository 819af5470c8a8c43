"""The serving backends are declared once (stsreg.infra.backend_specs.BACKENDS), each a module behind the protocol of
stsreg.product.serving.backends (export / load): one entry and its module add a backend that params and the command
line accept, registration exports, serving loads, and golden's coverage asks a case for."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

ADD_ONE = textwrap.dedent('''
    import json, shutil, sys, types
    from pathlib import Path
    from stsreg.infra import backend_specs as bs

    toy = types.ModuleType("stsreg.product.serving.backends.toy")  # a copy of the fp32 graph, run by ONNX Runtime

    def export(folder, out):
        shutil.copyfile(Path(folder) / bs.BY_NAME["onnx"].file, out)

    def load(model, file, threads):
        from stsreg.product.serving.backends import onnx_fp32
        return onnx_fp32.load(model, file, threads)

    toy.export, toy.load = export, load
    sys.modules[toy.__name__] = toy
    bs.BACKENDS += (bs.BackendSpec("toy", "toy", "onnx/toy.onnx", "a copy of the ONNX graph"),)
    bs.BY_NAME, bs.NAMES = {b.name: b for b in bs.BACKENDS}, tuple(b.name for b in bs.BACKENDS)

    import torch
    from stsreg.cli import build_parser
    from stsreg.infra.config import parse_params
    from stsreg.product.model import SiameseRegressor
    from stsreg.product.serving import export as ex

    folder = Path(sys.argv[1])
    SiameseRegressor.from_pretrained(sys.argv[2], max_length=16).save(folder)
    files = ex.export_all(folder)
    sentences = ["A man plays a guitar.", "Two dogs run."]
    got = {b: ex.use_backend(SiameseRegressor.load(folder, precision="fp32"), b, folder, 1).encode(sentences, 2, False)
           for b in ("onnx", "toy")}
    serve = build_parser().parse_args(["serve", "--model-uri", "models:/m/1", "--backend", "toy"])
    print(json.dumps({"params": parse_params({"serve": {"backend": "toy"}}).serve.backend,
                      "cli": serve.backend, "files": sorted(files), "toy_file": files["toy"].is_file(),
                      "same": bool(torch.allclose(got["onnx"], got["toy"])), "servable": ex.available(folder)}))
''')


def test_one_entry_and_its_module_add_a_serving_backend(tmp_path, tiny_backbone):
    run = subprocess.run([sys.executable, "-c", ADD_ONE, str(tmp_path / "m"), tiny_backbone], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["params"] == "toy" and out["cli"] == "toy"
    assert out["files"] == ["onnx", "onnx-int8", "toy"] and out["toy_file"] and out["same"]
    assert out["servable"] == ["torch", "onnx", "onnx-int8", "toy"]


def test_every_declared_backend_has_a_module_behind_the_protocol():
    from stsreg.infra.backend_specs import BACKENDS
    from stsreg.product.serving.backends import REGISTRY

    assert list(REGISTRY) == [b.name for b in BACKENDS]
    for module in REGISTRY.values():
        assert callable(module.export) and callable(module.load), module.__name__
