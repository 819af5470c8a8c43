"""Every entry of a declared list has a golden case, and the committed digests hold an output for it: a loss, a
comparison row, an NLI objective, a serving backend or a DVC stage added without one fails here, before a change to
its code could be recorded by ``make recommit`` unproven."""

import json

import yaml

from stsreg.infra.loss_specs import LOSSES
from stsreg.infra.method_specs import COMPARE, NLI
from stsreg.product.serving.export import BACKENDS
from tests.conftest import REPO
from tests.golden import cases
from tests.golden.__main__ import HASHES

DIGESTS = json.loads(HASHES.read_text())


def _trained(case: str, name: str) -> bool:
    return any(k.startswith(f"{name}/") and k.endswith("model.safetensors") for k in DIGESTS.get(case, {}))


def test_every_stage2_loss_has_a_golden_output():
    assert [n for n in LOSSES if not _trained("losses", n)] == []


def test_every_trained_comparison_row_and_nli_objective_has_a_golden_output():
    assert [m.name for m in COMPARE.values() if m.loss and not _trained("compare", m.name)] == []
    assert [o.name for o in NLI.values() if o.kind and not _trained("nli_table", o.name)] == []


def test_every_serving_backend_has_a_golden_output():
    assert [b for b in BACKENDS if b not in DIGESTS["export"]] == []


def test_every_dvc_stage_names_its_golden_cases():
    stages = set(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
    assert stages == set(cases.STAGES)
    assert {c for names in cases.STAGES.values() for c in names} <= set(cases.CASES) == set(DIGESTS)
