"""The compute-optimal frontier: N_opt(C) and D_opt(C) by Hoffmann et al.'s three approaches.

Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla),
estimate how the loss-minimising model size N_opt and token count D_opt grow with
the compute budget C (FLOPs, C = 6 N D) in three ways, each giving N_opt ∝ C^a and
D_opt ∝ C^b. This package does the same for any table of runs, per architecture
(and prior), numpy/scipy/pandas only (no torch; its figures, entries of the
figure registry, import matplotlib when they are drawn):

- inputs.py: the input table, checked and cleaned, and its budgets (the IsoFLOP
  groups);
- approaches.py: the three approaches on one group, and their bootstrap intervals;
- result.py: `FrontierResult`, its tables and the files they are written as,
  read back by the figures and the claims (`FrontierResult.read`);
- stage.py: the stage: `frontier` fits a table (`scalestudy frontier TABLE`),
  `study_frontier` a study's budgeted runs (the workflow's frontier rule,
  `scalestudy analyse`), `write_frontier` writes a result and its figures;
- study.py: a study's budgeted runs as the frontier's table.

**One compute axis** (`compute_axis`, named in every output): all three
approaches answer N_opt ∝ C^a on the same C, so that their exponents compare.

- "counted" (the default): C is the FLOPs the table counts (`compute`: a model's
  counted training FLOPs, attention and embeddings included). Approaches 1-2 put
  a budget's point at its compute (curves: the grid of their compute); approach 3
  finds the optimum among the runs a budget C buys, D = C / f(N), f(N) the FLOPs a
  token costs at size N: each size's mean compute / tokens over its runs,
  interpolated linearly in ln N - ln f between sizes and extended beyond the end
  sizes by the end segments' slopes (approaches.py `_cost_model`; f depends on N
  alone when FLOPs are counted per token). On each segment, where f ∝ N^g, the
  optimum has a closed form (`_chin_optimum`); the lowest of the segments' optima
  is it. Counted FLOPs per 6ND fall with N (2.48 to 1.12 from xxxs to m for the
  transformer of data/cache/frontier.parquet), so 6ND's closed form is not the
  counted optimum: on a surface with f ∝ N^0.85, a = beta / (alpha + 0.85 beta)
  = 0.484 where 6ND's gives 0.452 (tests/analysis/frontier/test_approaches.py).
- "6nd": C = 6 N D. Approaches 1-2 put a budget's point at 6 N_opt D_opt of the
  optimum found (curves: their 6ND replaces their compute); approach 3 takes f =
  6N, Hoffmann et al.'s closed form.
"""
