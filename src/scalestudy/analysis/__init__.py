"""The analysis of a study's run records, torch-free: power-law fits with
bootstrap intervals (stats.py, scaling.py, fits.py), tables (tables.py),
figures (figures/) and the papers' claims (claims/). It runs on the analysis
install alone (`pip install scalestudy`), from a study's runs.parquet or a
cached study (data/cache/).
"""

# The x axes a fit can use: training compute (training plus pretraining FLOPs),
# non-embedding parameters, or FLOPs per token (fits.x_values).
X_AXES = ("compute", "params", "flops_per_token")
# The fewest sizes a power law is fitted on (a line through two points has no
# residual freedom), and the fewest an IsoFLOP budget's parabola takes.
MIN_SIZES = 3
