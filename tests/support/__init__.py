"""What the tests share: the repository's paths, and one module per kind of helper
(cells: the tiny task runs train on; studies: the default study and dry runs of
the workflow; runs and claim_studies: synthetic run records; model_checks: backbone
properties; figure_checks: a figure read back from its data; no_torch: a plugin
under which torch cannot be imported)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"  # published reference files (data/README.md says whose)


def built_in(registry) -> dict:
    """A registry's own entries, without those an installed plugin added (the
    tests of the built-ins pin them; a plugin is held to scalestudy.extend's
    contract by the study check)."""
    from scalestudy.registry import BUILT_IN

    return {name: entry for name, entry in registry.items() if registry.source(name) == BUILT_IN}
