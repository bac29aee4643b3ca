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
REGISTRY_MODULES = {"architectures.py", "priors/__init__.py", "stages.py",
                    "tasks/__init__.py", "analysis/figures/__init__.py",
                    "analysis/claims/__init__.py"}


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def test_the_study_and_the_analysis_import_no_torch():
    """What the DAG and the analysis import: the study package, the registries,
    the records and every analysis module (figures and claims included)."""
    code = ("import sys, scalestudy.study, scalestudy.study.specs, scalestudy.study.costs, "
            "scalestudy.study.resources, scalestudy.architectures, scalestudy.priors, "
            "scalestudy.stages, scalestudy.tasks, scalestudy.records, scalestudy.cli, "
            "scalestudy.cli.commands, scalestudy.workflow, scalestudy.training.job, "
            "scalestudy.analysis.stages, "
            "scalestudy.analysis.fits, scalestudy.analysis.tables, "
            "scalestudy.analysis.figures.draw, scalestudy.analysis.claims, "
            "scalestudy.analysis.predict.stage, scalestudy.analysis.predict.figure; "
            "from scalestudy.analysis.figures import FIGURES; "
            "[__import__(f'scalestudy.analysis.figures.{name}') for name in FIGURES]; "
            "bad = {'torch', 'lightning'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_dag_imports_no_matplotlib():
    """The figure registry (read on every Snakemake invocation) leaves matplotlib
    to the figure modules, and the frontier's rules read the frontier's file
    names alone."""
    code = ("import sys, scalestudy.study, scalestudy.analysis.figures, "
            "scalestudy.analysis.frontier.result; assert 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_dry_run_of_a_budgeted_study_imports_no_matplotlib(tmp_path):
    """Every rule file parsed, the frontier's included: a dry run of the
    frontier preset (a study with budgets) in this interpreter loads no
    matplotlib."""
    from tests.support.studies import workflow_copy

    code = ("import sys; from snakemake.cli import main; "
            "sys.argv = ['snakemake', '-n', '--cores', '1', '--configfile', "
            "'config/studies/frontier.yaml']\n"
            "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done\n"
            "assert 'matplotlib' not in sys.modules, 'the DAG imported matplotlib'")
    done = subprocess.run([sys.executable, "-c", code], cwd=workflow_copy(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "frontier_figure" in done.stdout  # the frontier's rules were parsed


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


def module_names() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own)."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph() -> dict[str, set[str]]:
    """The scalestudy modules each module imports, anywhere in it (at its top,
    inside functions, under conditions), relative imports resolved. `from P
    import x` imports P.x when that is a module, else P (x is a name of P's
    __init__); `import P.Q` imports P.Q."""
    names = module_names()
    graph = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base
                          for alias in node.names}
        graph[name] = {m for m in found if m in names and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [node])):
            return cycle
    return None


def test_no_import_cycle():
    """No cycle among scalestudy's modules, counting every import: at a
    module's top and inside its functions (an import deferred into a function
    still ties the two modules together). The rule, exactly: module A imports B
    when A holds `import B`, `from B import name` (name not a module), or `from
    P import x` with B = P.x a module; relative imports are resolved first.
    Importing P.x also runs P's __init__, but that implicit import is not an
    edge: a package's __init__ may import its own submodules (`from . import
    text` in tasks/__init__.py, `from .checks import validate` in
    study/__init__.py), and a submodule may import its siblings (`from . import
    pycorpus` in tasks/text.py imports the module pycorpus, not tasks), as long
    as none of them imports the package back (`from . import TASKS`, a name of
    its __init__, would close a cycle). Modules loaded by name at run time
    (importlib: the registries' figure, task and model modules) are not seen."""
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    assert "scalestudy.cli.parser" in graph["scalestudy.cli"]
    assert "scalestudy.cli.fork_server" in graph["scalestudy.cli"]


# The layers (docs/ARCHITECTURE.md, "Layers"), lowest first: a package (a
# subpackage of scalestudy, or a top-level module) imports only packages of lower
# layers and those of its own group. No exception.
LAYERS = [
    {"foundation": {"registry", "options", "atomic", "faults", "locks", "errors", "records",
                    "ladder", "stages", "plugins"}},
    {"models": {"architectures", "models"}, "tasks": {"tasks"}, "trackers": {"trackers"}},
    {"priors": {"priors"}},
    {"extend": {"extend"}},
    {"analysis": {"analysis"}},
    {"study": {"study"}},
    {"training": {"training"}},
    {"top": {"cli", "workflow", "notebook", "scalestudy"}},
]


def package_of(module: str) -> str:
    """scalestudy.analysis.fits -> analysis; scalestudy.records -> records; the
    package itself -> scalestudy."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph() -> dict[str, set[str]]:
    """Which packages each package imports: every import of its modules (at the
    top, inside functions), and the __init__ of each package a submodule import
    runs (importing scalestudy.study.grid runs scalestudy.study)."""
    graph = import_graph()
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        found = packages.setdefault(package_of(module), set())
        for target in imported:
            parts = target.split(".")
            for i in range(2, len(parts) + 1):  # the target and each package above it
                name = ".".join(parts[:i])
                if name in graph and package_of(name) != package_of(module):
                    found.add(package_of(name))
    return packages


def test_layers_point_one_way():
    place = {package: (layer, group) for layer, groups in enumerate(LAYERS)
             for group, members in groups.items() for package in members}
    graph = package_graph()
    assert set(graph) == set(place), f"packages without a layer: {set(graph) - set(place)}"
    upward = [f"{a} -> {b}" for a, targets in sorted(graph.items()) for b in sorted(targets)
              if not (place[b][0] < place[a][0] or place[b][1] == place[a][1])]
    assert not upward, "imports that do not point down the layers:\n" + "\n".join(upward)


def test_the_package_inits_import_nothing_heavy():
    """Importing a package runs its __init__ alone: no torch, Lightning or
    matplotlib where the package is torch-free, and the study package runs no
    check until one is asked for."""
    code = ("import sys, scalestudy, scalestudy.study, scalestudy.priors, scalestudy.tasks, "
            "scalestudy.analysis, scalestudy.cli, scalestudy.training, "
            "scalestudy.analysis.frontier, scalestudy.analysis.predict; "
            "bad = {'torch', 'lightning', 'matplotlib'} & set(sys.modules); assert not bad, bad; "
            "import scalestudy.study.grid; assert 'scalestudy.study.checks' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_relative_import_names_a_module_of_the_package():
    """A relative import that climbs out of the package, or names no module (an
    import left behind by a move), fails where it runs: found here instead."""
    names = module_names()
    bad = []
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = package.split(".")
                if node.level > len(parts):
                    bad.append(f"{name}: from {'.' * node.level}{node.module or ''}")
                    continue
                base = ".".join([*parts[:len(parts) - node.level + 1],
                                 *([node.module] if node.module else [])])
                if base not in names and not any(f"{base}.{a.name}" in names
                                                 for a in node.names):
                    bad.append(f"{name}: from {'.' * node.level}{node.module or ''} ({base})")
    assert not bad, "\n".join(bad)


def test_the_cycle_finder_finds_function_level_and_package_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"p": {"p.x"}, "p.x": set()}) is None
    graph = import_graph()
    # Imports inside functions count, and a package's names are imports of it.
    assert "scalestudy.notebook" in graph["scalestudy"]  # open_study, on first use
    assert "scalestudy.analysis" in graph["scalestudy.analysis.claims.check"]  # X_AXES
    assert "scalestudy.tasks.pycorpus" in graph["scalestudy.tasks.text"]


def test_the_priors_own_their_hooks():
    """The prior registry and its hooks' modules (priors/fixup.py,
    priors/transfer.py) import no training module: training calls the hooks,
    never the other way round; and the loop finds the pretraining checkpoint's
    name in the stages, not in the priors."""
    graph = import_graph()
    priors = [name for name in graph if name.split(".")[:2] == ["scalestudy", "priors"]]
    assert {"scalestudy.priors.fixup", "scalestudy.priors.transfer"} <= set(priors)
    climbs = {f"{name} -> {imported}" for name in priors for imported in graph[name]
              if imported.startswith("scalestudy.training")}
    assert not climbs, climbs
    assert "scalestudy.priors" not in graph["scalestudy.training.loop"]


def test_every_registry_entry_is_named_once_and_looks_itself_up():
    for registry in (ARCHITECTURES, PRIORS, STAGES, TASKS, FIGURES, CLAIMS):
        assert all(registry[name].name == name for name in registry), registry.kind
    for name, arch in ARCHITECTURES.items():
        assert arch.load().__module__ == arch.module, name
    for name, prior in PRIORS.items():
        assert prior.needs is None or prior.needs in STAGES, name


# The test folders that claim to need no torch: an analysis-only install runs them.
TORCH_FREE_TESTS = ["tests/analysis", "tests/workflow"]


def test_the_torch_free_tests_are_collected_without_torch():
    """Every module of the torch-free test folders, their conftests and support
    modules imports where `import torch` fails (tests/support/no_torch.py)."""
    root = PACKAGE.parents[1]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "-p", "tests.support.no_torch",
                           *TORCH_FREE_TESTS], cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\d+ tests collected", done.stdout), done.stdout[-3000:]


def test_tests_mirror_the_package():
    """Every package of src/scalestudy has its tests in the same place under
    tests/ (a package of tests, so that two test files may share a name)."""
    tests = PACKAGE.parents[1] / "tests"
    packages = sorted(p.parent.relative_to(PACKAGE) for p in PACKAGE.rglob("__init__.py"))
    missing = [str(p) for p in packages if not (tests / p / "__init__.py").is_file()]
    assert not missing, f"no tests/<package>/__init__.py for: {missing}"
