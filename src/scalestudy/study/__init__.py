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
- ladder.py: the named sizes and the scaling protocols
"""

from .checks import (
    GIB,
    check_cluster,
    check_memory,
    machine_memory,
    trains_in_host_memory,
    validate,
)
from .schema import SCHEMA_PATH, ConfigError, ConfigWarning

__all__ = ["GIB", "SCHEMA_PATH", "ConfigError", "ConfigWarning", "check_cluster",
           "check_memory", "machine_memory", "trains_in_host_memory", "validate"]
