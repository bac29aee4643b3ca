import sys
from pathlib import Path

# model_checks.py lives beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
