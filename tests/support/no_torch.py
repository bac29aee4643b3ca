"""A pytest plugin (`-p tests.support.no_torch`) under which `import torch` and
`import lightning` fail as in the analysis install, where they are not installed:
test_layout.py collects the torch-free tests with it."""

import importlib.abc
import sys

MISSING = {"torch", "lightning"}


class Missing(importlib.abc.MetaPathFinder):
    """Finds no module of MISSING (not even None in sys.modules: libraries such as
    scipy look torch up there and would take None for the module)."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r} (tests.support.no_torch)",
                                      name=name)
        return None


assert not MISSING & set(sys.modules), "torch was imported before the plugin"
sys.meta_path.insert(0, Missing())
