"""scalestudy: scaling-law studies of architectures and initialisation priors.

Importing the package imports nothing heavy: torch and lightning are loaded only
by the modules that train (models, tasks' tensors, train), so the analysis
modules (records, scaling, plots) run on a machine without torch.
`scalestudy.open_study` opens a study in a notebook (scalestudy.notebook).
"""

__version__ = "0.1.0"
__all__ = ["open_study"]


def __getattr__(name: str):
    """`scalestudy.open_study` (the notebook API), imported on first use."""
    if name == "open_study":
        from .notebook import open_study

        return open_study
    raise AttributeError(f"module 'scalestudy' has no attribute {name!r}")
