"""Check the headline claims of the three papers on a study's run records.

    python analysis/claims.py results/<study>/runs.parquet results/<study>/fits.parquet \
        --out results/<study>/claims.md

The same as `scalestudy claims`; the checks and their decision rules are in
scalestudy.analysis.claims (torch-free).
"""

import sys

from scalestudy.cli import main

if __name__ == "__main__":
    sys.exit(main(["claims", *sys.argv[1:]]))
