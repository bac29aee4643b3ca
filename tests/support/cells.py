"""The tiny ListOps task the single-cell tests train on (a few seconds a run)."""

TASK = {"n_train": 64, "n_val": 16, "n_test": 16, "max_depth": 3, "max_args": 3,
        "min_length": 3, "max_length": 24}
