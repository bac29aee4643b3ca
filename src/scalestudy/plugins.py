"""The plugin modules a study names (`plugins: [my_arch, my_lab.tasks]`):
modules that are not installed as a distribution (those join the registries
by their entry points: registry.py), imported so that what they register
(scalestudy.extend.register) joins the registries.

They are imported wherever the registries are read: the DAG's parse
(workflow.prepare), which hands their names to every job in
$SCALESTUDY_PLUGINS, and so every `scalestudy` command (cli), the fork server
and its children, and a SLURM job (its own parse does the same). A module
named by a path relative to the workflow's directory (a file beside the
study: `plugins: [my_arch]` for ./my_arch.py) is found there: that directory
goes first on the import path. An import that fails is one PluginError
naming the plugin and the error. Torch-free: a plugin's registration module
must be too (its backbone's module is imported only when a run builds it).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path

from .registry import PluginError

ENV = "SCALESTUDY_PLUGINS"
ROOT_ENV = "SCALESTUDY_ROOT"  # the workflow's directory (workflow.prepare sets it)


def load(names, root: Path | str | None = None) -> list[str]:
    """Import the plugin modules `names` (once each), with `root` (default:
    $SCALESTUDY_ROOT, else the working directory) first on the import path,
    and add them to $SCALESTUDY_PLUGINS for the processes this one starts."""
    names = [n.strip() for n in names if n and n.strip()]
    if not names:
        return []
    where = str(Path(root or os.environ.get(ROOT_ENV) or os.getcwd()).resolve())
    if where not in sys.path:
        sys.path.insert(0, where)
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except PluginError:
            raise
        except Exception as err:
            last = traceback.extract_tb(err.__traceback__)[-1]
            raise PluginError(f"plugins: {name!r} cannot be imported ({type(err).__name__}: "
                              f"{err}; {Path(last.filename).name}:{last.lineno}), looked for "
                              f"installed and in {where}") from None
    given = [n for n in os.environ.get(ENV, "").split(",") if n]
    os.environ[ENV] = ",".join(dict.fromkeys([*given, *names]))
    return names


def from_environment() -> list[str]:
    """Import the plugins $SCALESTUDY_PLUGINS names (a job of a study that has some)."""
    return load(os.environ.get(ENV, "").split(","))


def code_version(module_name: str) -> str:
    """What identifies a plugin's code: the sha256 (16 hex) of its module's
    source file, else (no source) its distribution's version."""
    import hashlib
    import inspect

    module = importlib.import_module(module_name)
    try:
        source = inspect.getsourcefile(module)
    except TypeError:
        source = None
    if source and Path(source).is_file():
        return hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module_name.partition(".")[0])
    except PackageNotFoundError:
        return "unknown"
