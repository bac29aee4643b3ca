"""The study schema (config/schema.yaml), completed from the registries and
the declared sections, and its errors as one message each.

config/schema.yaml says what the study's name and grid mean; the names a grid
may list (architectures, sizes, priors, tasks) are filled in from the
registries when the schema is loaded, so that a new architecture, prior or
task is accepted without editing the schema, and so is every other section,
made from the dataclass that declares it: each task's (tasks/<task>.py) and
train, trainer, pretrain, upstream, fit and resources (study/config.py).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from ..architectures import ARCHITECTURES
from ..ladder import SIZES
from ..options import section_schema
from ..priors import PRIORS
from ..tasks import TASKS
from ..trackers import TRACKERS
from .config import SECTIONS

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "config" / "schema.yaml"


class ConfigError(ValueError):
    """A study configuration that cannot run, with the field and what it accepts."""


class ConfigWarning(UserWarning):
    """A study that runs, but not as its configuration alone says."""


def field_name(path) -> str:
    """['grid', 'archs', 1] -> 'grid.archs[1]' (the root is 'config')."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "config"


def _accepted(schema: dict) -> str:
    """What a schema node accepts, in words, for the error message."""
    items = schema.get("items", {})
    if "enum" in items:
        return "accepted values: " + ", ".join(map(str, items["enum"]))
    if "enum" in schema:
        return "accepted values: " + ", ".join(map(str, schema["enum"]))
    if "properties" in schema:
        return "accepted keys: " + ", ".join(schema["properties"])
    return schema.get("description", "").strip()


def _schema_error(error) -> ConfigError:
    """One jsonschema error as one message: field, what is wrong, what is accepted."""
    where = field_name(error.absolute_path)
    if error.validator == "minItems" and error.instance == []:
        what = "is empty; list at least one value"
    elif error.validator == "uniqueItems":
        seen, twice = set(), []
        for value in error.instance:
            key = repr(value)
            if key in seen and key not in twice:
                twice.append(key)
            seen.add(key)
        what = f"lists {', '.join(twice)} more than once"
    else:
        what = error.message
    accepted = _accepted(error.schema)
    return ConfigError(f"{where}: {what}" + (f"; {accepted}" if accepted else ""))


def complete(schema: dict) -> dict:
    """The schema with the registries' names and the task sections filled in.

    Each `{$ref: "#/$defs/<kind>"}` is replaced by the kind's enum itself, so
    that an error's schema node names the accepted values."""
    defs = {
        "arch": {"enum": list(ARCHITECTURES)},
        "size": {"enum": list(SIZES)},
        "prior": {"enum": list(PRIORS)},
        "task": {"enum": list(TASKS)},
        "tracker": {"enum": list(TRACKERS)},
    }

    def fill(node):
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return copy.deepcopy(defs[ref.removeprefix("#/$defs/")])
            return {key: fill(value) for key, value in node.items()}
        if isinstance(node, list):
            return [fill(value) for value in node]
        return node

    schema = copy.deepcopy(schema)
    schema["properties"]["tasks"]["properties"] = {
        name: section_schema(task.config) for name, task in TASKS.items()}
    schema["properties"].update({name: section_schema(kind) for name, kind in SECTIONS.items()})
    schema = fill(schema)
    schema.pop("$defs", None)
    return schema


def load_schema(schema_path: str) -> dict:
    """The schema completed from the registries as they are now (a plugin
    loaded since adds its names)."""
    return _completed(schema_path, _registered())


def _registered() -> tuple:
    """What the completed schema depends on: every registry's names."""
    return tuple(tuple(registry) for registry in (ARCHITECTURES, PRIORS, TASKS, TRACKERS))


@functools.cache
def _completed(schema_path: str, registered: tuple) -> dict:
    with open(schema_path) as f:
        return complete(yaml.safe_load(f))


@functools.cache
def _checker(schema_path: str, registered: tuple):
    import jsonschema

    return jsonschema.Draft202012Validator(_completed(schema_path, registered))


def _validator(schema_path: str):
    return _checker(schema_path, _registered())


_BOOLEANS = {"true": True, "false": False}
_NULLS = ("null", "~", "")


def _scalar(text: str, node: dict):
    """`text` as the first of the node's scalar types it reads as, else itself."""
    if "enum" in node:  # an enum may hold non-strings (precision 32)
        return next((v for v in node["enum"] if str(v) == text and v != text), text)
    types = node.get("type", [])
    for kind in [types] if isinstance(types, str) else types:
        try:
            if kind == "integer":
                return int(text)
            if kind == "number":
                return float(text) if not text.lstrip("+-").isdigit() else int(text)
        except ValueError:
            continue
        if kind == "boolean" and text.lower() in _BOOLEANS:
            return _BOOLEANS[text.lower()]
        if kind == "null" and text in _NULLS:
            return None
    return text


def coerce(value, node: dict):
    """`value` with every string where the schema `node` wants an integer,
    number, boolean or null read as one ("0" -> 0, "2e-3" -> 0.002, "true" ->
    True): Snakemake's --config hands nested values over as strings (it loads
    them with YAML's BaseLoader). Dicts and lists are updated in place (the
    workflow's `config` is the one validated); what still does not fit is left
    for the schema to refuse, naming the field."""
    if isinstance(value, dict):
        properties = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                value[key] = coerce(item, child)
        return value
    if isinstance(value, list):
        if isinstance(node.get("items"), dict):
            value[:] = [coerce(item, node["items"]) for item in value]
        return value
    if isinstance(value, str):
        for option in node.get("oneOf", node.get("anyOf", [node])):
            read = _scalar(value, option)
            if read is not value:
                return read
    return value


def coerce_config(config: dict, schema_path: Path | str = SCHEMA_PATH) -> dict:
    """The config's command-line strings read as the schema's types, in place."""
    return coerce(config, load_schema(str(schema_path)))


def check_schema(config, schema_path: Path | str = SCHEMA_PATH) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator(str(schema_path)).iter_errors(config))
    if error is not None:
        raise _schema_error(error) from None
