"""Planning a study before it runs (`scalestudy plan`, cli/commands.py): for
every claim a candidate grid can check, the probability that the study decides
it (its power, under the claims' own rules), and the cheapest design (sizes,
over how many decades, and seeds) that reaches a stated power.

- model.py: what the runs are expected to show, `Model`: each cell's law
  (error and upstream loss against the ladder's non-embedding parameters) and
  the runs' noise, estimated from a pilot's records or stated; it simulates
  arrays of runs for the fast rules and whole run records for the claims
  themselves;
- stats.py: the claims' statistics vectorised over many simulated studies:
  the residual bootstrap's t interval of a line and of a contrast of lines
  (its variance in closed form: the bootstrap's, replicates without end),
  Welch's interval;
- rules.py: each claim's decision rule (claims/) restated on those arrays,
  `PLAN_RULES`; a claim without one is planned by simulating whole records
  and running the claim itself (slower);
- design.py: a design (sizes, seeds), the candidates, the cheapest one that
  reaches the power;
- options.py, stage.py: the options and the stage (`plan`), and the preset it
  writes.

Torch-free; the cost of a design is the caller's (the study's cost model,
study/costs.py, lies above the analysis: cli/commands.py hands it in).
"""
