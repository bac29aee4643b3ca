"""Documented config options: a dataclass field that carries its description
and the JSON-schema bounds of its value, so that a config dataclass is the one
place an option is declared (its type, default, meaning and accepted values)
and the study schema's section for it is derived (`section_schema`).

A task's config dataclass is declared this way (tasks/<task>.py), and so is
each other section of a study (study/config.py): the schema's section is made
from it when the study schema is loaded (scalestudy.study.schema), and the
options a study does not state take their defaults from it (`defaults`).
Torch-free.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Callable
from typing import Any

JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def option(default: Any, doc: str, by_source: dict | None = None, *,
           in_spec: Callable[[dict], bool] | str | None = None, per_run: bool = False,
           **bounds) -> Any:
    """A dataclass field with a default, a description and schema bounds
    (minimum, maximum, enum, minItems, ...). `by_source`: a value the data's
    source implies (an image size, a length), source -> value; the field's
    default is then None, filled in by `source_defaults` with the source's own.

    For a section that is also a run spec's (study/config.py): `in_spec` says
    whether the spec states the field (`spec_values`): None always,
    UNLESS_DEFAULT where it is not at its default, or a predicate of the
    section's values; `per_run`, a field the grid sets for each run rather
    than the study config (no schema key, no study default)."""
    doc = " ".join(doc.split())
    if by_source:
        default = None
        doc += " (default: the source's own, " + ", ".join(
            f"{source} {value}" for source, value in by_source.items()) + ")"
    metadata = {"doc": doc, "bounds": bounds, "by_source": by_source, "in_spec": in_spec,
                "per_run": per_run}
    if isinstance(default, list | dict | set):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def source_defaults(cfg) -> None:
    """Fill each `by_source` option of the frozen dataclass `cfg` left None with
    its value for cfg.source (call first in __post_init__, so that the checks
    after it see the value and refuse an explicit one that contradicts the source)."""
    for f in dataclasses.fields(cfg):
        by_source = f.metadata.get("by_source")
        if by_source and getattr(cfg, f.name) is None:
            # An unknown source takes the first one's value: the task's check of
            # its source (tasks.task_config) names the field and what it accepts.
            value = by_source.get(cfg.source, next(iter(by_source.values())))
            object.__setattr__(cfg, f.name, value)


def _value_schema(hint) -> dict:
    if hint in JSON_TYPES:
        return {"type": JSON_TYPES[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if type(None) in args and len(args) == 2:  # X | None: left to the source (by_source)
        node = _value_schema(next(a for a in args if a is not type(None)))
        return {**node, "type": [node["type"], "null"]}
    if origin in (list, tuple) or hint in (list, tuple):
        return {"type": "array", "items": _value_schema(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        return {"type": "object"}
    raise TypeError(f"no JSON schema for a config option of type {hint!r}")


def section_schema(cls: type, description: str = "") -> dict:
    """The JSON schema of a config section declared by dataclass `cls`: every
    field an optional key of its type, with its description and bounds; no
    other key."""
    hints = typing.get_type_hints(cls)
    properties = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if not f.init or meta.get("per_run"):
            continue
        typed = {"enum", "oneOf"} & set(meta.get("bounds", {}))  # the bounds say the type
        node = {} if typed else _value_schema(hints[f.name])
        node.update(meta.get("bounds", {}))
        if "doc" in meta:
            node["description"] = meta["doc"]
        properties[f.name] = node
    return {"type": "object", "additionalProperties": False,
            "description": " ".join((description or cls.__doc__ or "").split()),
            "properties": properties}


def defaults(cls: type) -> dict:
    """The study options of dataclass `cls` at their defaults, as JSON values
    (tuples as lists), in the order they are declared."""
    return {f.name: list(value) if isinstance(value := _default(f), tuple) else value
            for f in dataclasses.fields(cls) if f.init and not f.metadata.get("per_run")}


def _default(f):
    return f.default_factory() if f.default is dataclasses.MISSING else copy.deepcopy(f.default)


# `in_spec` of a field a spec states only where it is not at its default.
UNLESS_DEFAULT = "unless default"


def spec_values(cls: type, values: dict) -> dict:
    """`values` (of a section declared by `cls`) as a run's spec holds them:
    without the fields whose `in_spec` says no."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return {key: value for key, value in values.items()
            if key not in fields or _in_spec(fields[key], values)}


def _in_spec(f, values: dict) -> bool:
    rule = f.metadata.get("in_spec")
    if rule is None:
        return True
    if rule == UNLESS_DEFAULT:
        value, default = values[f.name], _default(f)
        return (tuple(value or ()) if isinstance(default, tuple) else value) != default
    return rule(values)
