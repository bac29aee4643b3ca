"""Documented config options: a dataclass field that carries its description
and the JSON-schema bounds of its value, so that a config dataclass is the one
place an option is declared (its type, default, meaning and accepted values)
and the study schema's section for it is derived (`section_schema`).

A task's config dataclass is declared this way (tasks/<task>.py): the schema's
`tasks.<task>` section is made from it when the study schema is loaded
(scalestudy.study.schema). Torch-free.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def option(default: Any, doc: str, **bounds) -> Any:
    """A dataclass field with a default, a description and schema bounds
    (minimum, maximum, enum, minItems, ...)."""
    metadata = {"doc": " ".join(doc.split()), "bounds": bounds}
    if isinstance(default, list | dict | set):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _value_schema(hint) -> dict:
    if hint in JSON_TYPES:
        return {"type": JSON_TYPES[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, tuple):
        return {"type": "array", "items": _value_schema(args[0])}
    raise TypeError(f"no JSON schema for a config option of type {hint!r}")


def section_schema(cls: type, description: str = "") -> dict:
    """The JSON schema of a config section declared by dataclass `cls`: every
    field an optional key of its type, with its description and bounds; no
    other key."""
    hints = typing.get_type_hints(cls)
    properties = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        meta = f.metadata
        node = {} if "enum" in meta.get("bounds", {}) else _value_schema(hints[f.name])
        node.update(meta.get("bounds", {}))
        if "doc" in meta:
            node["description"] = meta["doc"]
        properties[f.name] = node
    return {"type": "object", "additionalProperties": False,
            "description": " ".join((description or cls.__doc__ or "").split()),
            "properties": properties}
