"""What the tests share: the repository's paths, and one module per kind of helper
(cells: the tiny task runs train on; studies: the default study and dry runs of
the workflow; runs and claim_studies: synthetic run records; model_checks: backbone
properties; figure_checks: a figure read back from its data; no_torch: a plugin
under which torch cannot be imported)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"  # published reference files (data/README.md says whose)
