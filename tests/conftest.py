import sys
from pathlib import Path

import torch

# model_checks.py lives beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

# The tests build tiny models: one thread is as fast as two and does not fight
# a busy machine's other processes for its cores.
torch.set_num_threads(1)
