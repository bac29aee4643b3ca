"""Predictions from a ladder of runs (`scalestudy predict`): the loss, and a
downstream metric, of a run larger than any trained, with intervals that say
how far to trust them.

Step 1 fits L(N, D) = E + A/N^alpha + B/D^beta to the ladder as Hoffmann et
al. 2022 ("Training Compute-Optimal Large Language Models", approach 3) as
replicated by Besiroglu et al. 2024 ("Chinchilla Scaling: A replication
attempt"), with the project's fitter (scaling.fit_chinchilla), and predicts
each target (N, D). Step 2 (optional) maps the loss to a downstream metric by
Bhagia et al. 2024's sigmoid (OLMo's model ladder, arXiv:2412.04403), chained
to step 1. numpy, scipy and pandas only (no torch; the figure imports
matplotlib when it is drawn):

- inputs.py: the ladder table (any table, or a study's run records), checked,
  and the targets;
- resampling.py: the bootstrap's draws of runs, shared by both steps;
- loss.py: step 1, its refits, the noise of one run, and whether the optimum
  is well determined;
- downstream.py: step 2, its refits and its checks (no signal, lack of fit);
- holdout.py: `--holdout`, the largest size predicted from the rest;
- result.py: `PredictionResult` and its files;
- stage.py: `predict`, the stage, and `write_prediction` (one directory
  replaced whole, atomic.replacing_directory);
- figure.py: the figure.

Faithful: approach 3's objective, start grid and optimiser (the frontier's);
the bootstrap over runs as Besiroglu et al. resample Hoffmann et al.'s points
(within sizes where a ladder repeats its sizes); the two-step chain. Ours, not
the papers': the prediction interval (bootstrap refits plus a resampled
residual: the papers report the surface's uncertainty, not one run's), the
checks of determination and of the mapping's fit, and the holdout.
"""
