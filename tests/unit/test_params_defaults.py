"""Defaults are written once: the committed ``params.yaml`` holds, value by value, what the code's knobs default to
(a stage reads params.yaml; a command or library call without it gets the same settings). A default changed in one
place and not the other fails here, naming the key."""

import dataclasses

import yaml

from stsreg.infra.config import Params, parse_params
from stsreg.infra.knobs import Yaml12Loader
from tests.conftest import REPO


def _differences(code, yaml_value, key: str = "") -> list[str]:
    if dataclasses.is_dataclass(code):
        out = []
        for f in dataclasses.fields(code):
            out += _differences(getattr(code, f.name), getattr(yaml_value, f.name), f"{key}.{f.name}".lstrip("."))
        return out
    if isinstance(code, tuple) and code and dataclasses.is_dataclass(code[0]) and len(code) == len(yaml_value):
        return [d for i, (c, y) in enumerate(zip(code, yaml_value)) for d in _differences(c, y, f"{key}[{i}]")]
    return [] if code == yaml_value else [f"{key}: code {code!r}, params.yaml {yaml_value!r}"]


def test_params_yaml_holds_the_codes_defaults_value_by_value():
    raw = yaml.load((REPO / "params.yaml").read_text(), Loader=Yaml12Loader)
    assert _differences(Params(), parse_params(raw)) == []


def test_params_yaml_names_every_key_the_code_has():
    """Every knob appears in params.yaml (where a user looks for it), and none that the code lacks."""
    raw = yaml.load((REPO / "params.yaml").read_text(), Loader=Yaml12Loader)

    def missing(cls, section: dict, key: str) -> list[str]:
        out = []
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            if f.name not in section:
                out.append(f"{key}{f.name}")
            elif dataclasses.is_dataclass(default):
                out += missing(type(default), section[f.name] or {}, f"{key}{f.name}.")
        return out

    assert missing(Params, raw, "") == []
