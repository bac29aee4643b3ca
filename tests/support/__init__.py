"""What the tests share: the repository's paths, and one module per kind of helper
(cells: the tiny task runs train on; model_checks: backbone properties; figure_checks:
a figure read back from its data; claim_studies and runs: synthetic run records)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"  # published reference files (data/README.md says whose)
