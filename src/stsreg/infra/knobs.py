"""How a ``params.yaml`` field is declared and checked: :func:`knob` states a field's default, help and constraints
once; :func:`section` turns a class of knobs into a frozen pydantic dataclass whose types carry those constraints
(strict scalars, ranges, choices as ``Literal``, anchored patterns, per element for tuples, per key and
value for mappings), so pydantic checks every
key, type and range, and :func:`problems` words its errors as ``<file>: <dotted key>: <reason>``.

The YAML is read with YAML 1.2's booleans (:class:`Yaml12Loader`): only ``true``/``false`` are booleans, and a bare
``yes``/``no``/``on``/``off`` (:class:`BareWord`) is refused in every field, since DVC (YAML 1.2) and PyYAML (1.1)
would read it differently.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, ConfigDict, Field, Strict, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from stsreg.infra.errors import InputError

_TYPE_WORDS = {bool: "a boolean (true/false)", int: "an integer", float: "a float", str: "a string"}
# YAML 1.1 reads `1e-5` (no dot) as a string: a float field accepts such a numeric string, nothing else.
_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class BareWord(str):
    """A bare ``yes``/``no``/``on``/``off``/``y``/``n`` in params.yaml: a boolean to YAML 1.1, a string to YAML 1.2."""


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans: only true/false (any case) are booleans."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))
Yaml12Loader.add_implicit_resolver("tag:stsreg,2026:bare-word",
                                   re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$"),
                                   list("yYnNoO"))
Yaml12Loader.add_constructor("tag:stsreg,2026:bare-word", lambda loader, node: BareWord(loader.construct_scalar(node)))


def knob(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING,
         choices: tuple | None = None, ge: float | None = None, gt: float | None = None, le: float | None = None,
         lt: float | None = None, pattern: str | None = None) -> Any:
    """A params field: its default (or ``factory``), help text and constraints (for tuples: per element), which
    :func:`section` writes into the field's type."""
    meta = {"help": help, "choices": choices, "ge": ge, "gt": gt, "le": le, "lt": lt, "pattern": pattern}
    meta = {k: v for k, v in meta.items() if v is not None and v != ""}
    # under one key of the field's metadata: pydantic reads its own constraint names there, for the whole field
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata={"knob": meta})
    return dataclasses.field(default=default, metadata={"knob": meta})


def _scalar_input(tp: type):
    """Before pydantic's strict check: a bare word is refused with the type it should have been; a float field takes
    YAML 1.1's numeric strings."""
    def convert(value: Any) -> Any:
        if isinstance(value, BareWord):
            raise ValueError(f"bare `{value}` is ambiguous (a boolean to YAML 1.1, a string to YAML 1.2); expected "
                             f"{_TYPE_WORDS[tp]}: write true/false for a boolean or quote it ('{value}') for a string")
        if tp is float and isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
            return float(value)
        return value
    return BeforeValidator(convert)


def _typed(tp: Any, meta: dict) -> Any:
    """The pydantic type of a field declared as ``tp`` with ``meta`` (a section as given; a tuple per element; an
    empty YAML value, ``key:``, as the empty section or list)."""
    if typing.get_origin(tp) is tuple:
        (elem, _ellipsis) = typing.get_args(tp)
        return Annotated[tuple[_typed(elem, meta), ...], BeforeValidator(lambda v: [] if v is None else v)]
    if dataclasses.is_dataclass(tp):
        return Annotated[tp, BeforeValidator(lambda v: {} if v is None else v)]
    if typing.get_origin(tp) is dict:  # a mapping: its keys match ``pattern``, its values the limits
        key, value = typing.get_args(tp)
        keys = {"pattern": f"^(?:{meta['pattern']})$"} if "pattern" in meta else {}
        values = {k: v for k, v in meta.items() if k != "pattern"}
        return Annotated[dict[Annotated[key, Strict(), Field(**keys)], _typed(value, values)],
                         BeforeValidator(lambda v: {} if v is None else v)]
    base = Literal[meta["choices"]] if "choices" in meta else Annotated[tp, Strict()]
    limits = {k: meta[k] for k in ("ge", "gt", "le", "lt") if k in meta}
    if "pattern" in meta:
        limits["pattern"] = f"^(?:{meta['pattern']})$"
    return Annotated[base, _scalar_input(tp), Field(**limits)]


def add_knobs(fields: dict[str, tuple[Any, Any]], after: str):
    """A class decorator (before :func:`section`) that adds knobs declared elsewhere: ``fields`` maps a name to its
    ``(type, knob(...))``, inserted after the field ``after`` in that order (the loss knobs of
    :mod:`stsreg.infra.loss_specs`, which own their defaults, help and limits)."""
    def add(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        clash = set(own) & set(fields)
        if after not in own or clash:
            raise TypeError(f"{cls.__name__}: cannot add {sorted(fields)} after {after!r} (fields {sorted(own)})")
        order: dict[str, Any] = {}
        for name, tp in own.items():
            order[name] = tp
            if name == after:
                order.update({n: t for n, (t, _) in fields.items()})
        for name, (_, declared) in fields.items():
            setattr(cls, name, declared)
        cls.__annotations__ = order
        return cls
    return add


def section(cls: type) -> type:
    """A params section: ``cls``'s knobs as a frozen pydantic dataclass (unknown keys refused), each field's type
    carrying its knob's constraints."""
    hints = typing.get_type_hints(cls)
    typed = {}
    for name in cls.__dict__.get("__annotations__", {}):  # this class's own fields (a parent section typed its own)
        declared = cls.__dict__.get(name)
        meta = dict(declared.metadata.get("knob", {})) if isinstance(declared, dataclasses.Field) else {}
        typed[name] = _typed(hints[name], meta)
    cls.__annotations__ = typed
    return pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))(cls)


def _walk(root: type, loc: tuple) -> tuple[type, dict, Any]:
    """Along ``loc`` from ``root``: the section holding its last named key, that field's knob metadata, and the type
    found at ``loc`` (``None`` past an unknown key)."""
    owner, meta, here = root, {}, root
    for part in loc:
        if isinstance(part, int) or not dataclasses.is_dataclass(here):
            continue  # an element of a tuple: ``here`` is already the element type
        fields = {f.name: f for f in dataclasses.fields(here)}
        owner = here
        if part not in fields:
            return owner, {}, None
        meta, tp = dict(fields[part].metadata.get("knob", {})), typing.get_type_hints(here)[part]
        here = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
    return owner, meta, here


def _reason(err: dict, root: type) -> str:
    kind, loc, got = err["type"], err["loc"], f"{err['input']!r:.60}"
    owner, meta, here = _walk(root, loc)
    if kind == "missing":
        return "required key missing"
    if kind == "unexpected_keyword_argument":
        return f"unknown key; {owner.__name__} has {', '.join(f.name for f in dataclasses.fields(owner))}"
    if kind in ("dataclass_type", "dataclass_args_type"):
        return f"expected a mapping of {getattr(here, '__name__', here)} keys, got {got}"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {got}"
    if kind == "value_error":  # a bare word (a scalar's check) or a rule between a section's fields (its validator)
        return str(err["ctx"]["error"])
    if kind == "literal_error":
        return f"expected one of {', '.join(map(str, meta.get('choices', ())))}, got {got}"
    if kind == "string_pattern_mismatch":
        return f"expected a value matching {meta.get('pattern')}, got {got}"
    words = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"), "less_than_equal": ("le", "<="),
             "less_than": ("lt", "<")}
    if kind in words:
        key, word = words[kind]
        return f"expected a value {word} {err['ctx'][key]}, got {got}"
    expected = {"bool_type": bool, "int_type": int, "float_type": float, "string_type": str, "bool_parsing": bool,
                "int_parsing": int, "float_parsing": float, "int_from_float": int}.get(kind)
    if expected:
        return f"expected {_TYPE_WORDS[expected]}, got {got}"
    return f"{err['msg']}, got {got}"


def problems(exc: ValidationError, root: type, source: str) -> list[str]:
    """Every error of ``exc`` (validating ``root``) as ``<source>: <dotted key>: <reason>``."""
    out = []
    for err in exc.errors():
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(top level)"
        where = where.replace(".[key]", " (the key)")  # a mapping's key, as pydantic locates it
        out.append(f"{source}: {where}: {_reason(err, root)}")
    return out


def build(cls: type, source: str, **values: Any) -> Any:
    """``cls(**values)`` for a section built from something other than params.yaml (command-line flags): its
    constraints are checked as params.yaml's are, and a problem is an :class:`~stsreg.infra.errors.InputError`
    naming ``source`` (``stsreg data check: d: expected a value > 0, got -1.0``), not a traceback."""

    try:
        return cls(**values)
    except ValidationError as exc:
        raise InputError("\n".join(problems(exc, cls, source))) from None
