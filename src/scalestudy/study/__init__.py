"""A study, before any of it runs: its configuration checked, its grid of
cells, the specs of its runs, and what its jobs cost and ask a cluster for.

The Snakefile (workflow/rules/common.smk), the tests and tools/ use this
package, never a copy of it; it imports no torch, so that every Snakemake
invocation, dry runs included, is quick.

- config.py: the config's sections declared once (defaults, schema, types);
  StudyConfig, the typed config; load_study
- schema.py: config/schema.yaml completed from the registries and config.py;
  ConfigError, ConfigWarning
- checks.py: `validate`, everything a study is refused for
- grid.py: cells, the pretraining runs they need, run directories
- specs.py: RunSpec, PretrainSpec and their builders
- costs.py: estimated memory and FLOPs; job priorities
- resources.py: what a job asks SLURM for
- plateau.py: when a run has converged (train.until: plateau)
"""

from importlib import import_module

# Where each name the package exports lives; imported on first use, so that
# importing one submodule (study.grid, study.plateau) runs no config check.
EXPORTS = {"GIB": "checks", "check_cluster": "checks", "check_memory": "checks",
           "machine_memory": "checks", "trains_in_host_memory": "checks",
           "validate": "checks", "SCHEMA_PATH": "schema", "ConfigError": "schema",
           "ConfigWarning": "schema"}
__all__ = sorted(EXPORTS)


def __getattr__(name: str):
    if name in EXPORTS:
        return getattr(import_module(f".{EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
