"""scalestudy: scaling-law studies of architectures and initialisation priors.

Importing the package imports nothing heavy: torch and lightning are loaded only
by the modules that train (models, tasks' tensors, train), so the analysis
modules (records, scaling, plots) run on a machine without torch.
"""

__version__ = "0.1.0"
