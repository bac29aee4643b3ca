"""scalestudy: scaling-law studies of architectures and initialisation priors.

Importing the package imports nothing: torch and lightning are loaded only
by the modules that train (models, tasks' tensors, train), so the analysis
modules (records, scaling, plots) run on a machine without torch.
`scalestudy.open_study` opens a study in a notebook (scalestudy.notebook), and
`scalestudy.__version__` is the installed package's version (its metadata);
each is looked up on first use.
"""

__all__ = ["open_study"]


def __getattr__(name: str):
    if name == "__version__":
        from .records import package_version

        return package_version()
    if name == "open_study":
        from .notebook import open_study

        return open_study
    raise AttributeError(f"module 'scalestudy' has no attribute {name!r}")
