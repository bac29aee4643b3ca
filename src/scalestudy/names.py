"""The study's vocabulary: the accepted names of every grid dimension.

Kept free of torch so that config validation, records and figures can use it on
an analysis-only install. The model and prior registries are checked against
these tuples by the tests, and config/schema.yaml lists the same names.
"""

ARCHITECTURES = (
    "transformer", "glu", "mos", "evolved", "universal", "switch", "performer", "funnel",
    "albert", "mixer", "lconv", "dconv", "s4", "s4_unstructured",
)
PRIORS = ("random", "random_noln", "random_causal", "tfixup", "dtfixup", "spt", "spt_causal",
          "upstream", "scratch_matched")
# The Long Range Arena tasks (tasks/): each reads LRA's release or an offline stand-in.
TASKS = ("listops", "text", "retrieval", "image", "pathfinder", "pathx")
# Architectures whose mechanism has no causal mode (funnel: pooling merges
# positions t and t+1); the registry and the workflow refuse train.causal there.
NON_CAUSAL = ("funnel",)
STAGES = ("upstream", "spt", "spt_causal", "finetune", "scratch")
STATUSES = ("ok", "diverged", "failed")
# How a fit ends (train.until), and a record's stopped_by: after max_steps, or
# at its validation loss's plateau (loop.Fit.validate) with max_steps as the cap.
UNTIL = ("max_steps", "plateau")
NORMS = ("pre", "post", "none")
X_AXES = ("compute", "params", "flops_per_token")
