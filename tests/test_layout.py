"""What the layout promises (docs/ARCHITECTURE.md): the torch boundary, one
registry per kind that nothing else repeats, and no import cycle."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from scalestudy.analysis.claims import CLAIMS
from scalestudy.analysis.figures import FIGURES
from scalestudy.architectures import ARCHITECTURES
from scalestudy.priors import PRIORS
from scalestudy.stages import STAGES
from scalestudy.tasks import TASKS

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "scalestudy"
# The registries: where each kind's names are written down.
REGISTRY_MODULES = {"architectures.py", "priors.py", "stages.py", "tasks/__init__.py",
                    "analysis/figures/__init__.py", "analysis/claims/__init__.py"}


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def test_the_study_and_the_analysis_import_no_torch():
    """What the DAG and the analysis import: the study package, the registries,
    the records and every analysis module (figures and claims included)."""
    code = ("import sys, scalestudy.study, scalestudy.study.specs, scalestudy.study.costs, "
            "scalestudy.study.resources, scalestudy.architectures, scalestudy.priors, "
            "scalestudy.stages, scalestudy.tasks, scalestudy.records, scalestudy.cli, "
            "scalestudy.analysis.fits, scalestudy.analysis.tables, "
            "scalestudy.analysis.figures.draw, scalestudy.analysis.claims; "
            "from scalestudy.analysis.figures import FIGURES; "
            "[__import__(f'scalestudy.analysis.figures.{name}') for name in FIGURES]; "
            "bad = {'torch', 'lightning'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_dag_imports_no_matplotlib():
    """The figure registry (read on every Snakemake invocation) leaves matplotlib
    to the figure modules."""
    code = ("import sys, scalestudy.study, scalestudy.analysis.figures; "
            "assert 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


NAMES = set(ARCHITECTURES) | set(PRIORS) | set(STAGES) | set(TASKS)
_ALT = "|".join(sorted(map(re.escape, NAMES), key=len, reverse=True))
# A comparison with a quoted name: == "x", "x" !=, in ("x", ...), .isin(["x", ...]).
COMPARISON = re.compile(rf'(==|!=)\s*["\']({_ALT})["\']|["\']({_ALT})["\']\s*(==|!=)'
                        rf'|\bin\s*[(\[{{]\s*["\']({_ALT})["\']|\.isin\(\s*\[\s*["\']({_ALT})["\']')


def test_no_module_compares_against_a_registered_name():
    """Behaviour lives with the thing it belongs to: outside the registries no
    module asks for an architecture, prior, stage or task by name (a figure or
    claim about named things gets them from its registry entry's params)."""
    hits = [f"{name}:{i}: {line.strip()}" for name, text in modules()
            if name not in REGISTRY_MODULES
            for i, line in enumerate(text.splitlines(), 1)
            if COMPARISON.search(line) and "a_init" not in line]  # S4's init mode "random"
    assert not hits, "\n".join(hits)


def _imports(name: str, text: str) -> set[str]:
    """The scalestudy modules a module imports at its top level."""
    package = ("scalestudy." + name.removesuffix(".py").replace("/", ".")).removesuffix(
        ".__init__")
    if not name.endswith("__init__.py"):
        package = package.rsplit(".", 1)[0]
    out = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            else:
                base = node.module or ""
            if node.level and not node.module:  # from . import submodule
                out |= {f"{base}.{a.name}" for a in node.names}
            elif node.level:
                out.add(f"{base}.{node.module}")
            elif base.startswith("scalestudy"):
                out.add(base)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("scalestudy")}
    return out


def test_no_import_cycle():
    """Module-level imports between scalestudy's modules form no cycle (the CLI
    and the warm server, which used to import each other, included)."""
    graph = {}
    for name, text in modules():
        module = "scalestudy." + name.removesuffix(".py").replace("/", ".")
        graph[module.removesuffix(".__init__")] = _imports(name, text)
    state: dict[str, int] = {}

    def visit(node, path):
        if state.get(node) == 1:
            raise AssertionError("import cycle: " + " -> ".join([*path, node]))
        if state.get(node) == 2 or node not in graph:
            return
        state[node] = 1
        for nxt in graph[node]:
            visit(nxt, [*path, node])
        state[node] = 2

    for node in graph:
        visit(node, [])
    assert "scalestudy.commands" in graph["scalestudy.cli"]
    assert "scalestudy.cli" not in graph["scalestudy.warm"]


def test_every_registry_entry_is_named_once_and_looks_itself_up():
    for registry in (ARCHITECTURES, PRIORS, STAGES, TASKS, FIGURES, CLAIMS):
        assert all(registry[name].name == name for name in registry), registry.kind
    for name, arch in ARCHITECTURES.items():
        assert arch.load().__module__ == f"scalestudy.models.{arch.module}", name
    for name, prior in PRIORS.items():
        assert prior.needs is None or prior.needs in STAGES, name
