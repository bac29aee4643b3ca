# The analysis stages' rules, one per stage of scalestudy.analysis.stages, made
# from its entry: its command (`scalestudy <stage>`, or the command its entry
# names) on the collected runs and the artifacts of the stages it needs, writing
# its artifact (ARTIFACT, common.smk), with the options of its declaration that
# the study's `fit` section states (x_axis, n_boot, ci: the study's values). A
# stage only some grids have (the frontier: grid.budgets) has its rule only
# there. The figures stage's rules are one job per figure (figures.smk). Adding
# a kind of analysis adds no rule here: its entry makes it. Only the registry
# and the options' declarations are imported (the frontier's file names read
# numpy and pandas), never the fits nor matplotlib.

from scalestudy.analysis.stages import command_line, study_values

RUNS = f"{OUT}/runs.parquet"
# Which stages this study's grid has a rule for, in order, and their files.
STAGE_RULES = [
    stage
    for stage in ANALYSIS_STAGES.values()
    if stage.artifact and stage.rule and (BUDGETS or not stage.on_budgets)
]
STAGE_OUTPUTS = {
    stage.name: (
        [f"{ARTIFACT[stage.name]}/{name}" for name in stage.artifact_files()]
        if stage.is_directory
        else [ARTIFACT[stage.name]]
    )
    for stage in STAGE_RULES
}
# What rule all asks for: every stage rule's outputs.
ANALYSIS_OUTPUTS = [path for paths in STAGE_OUTPUTS.values() for path in paths]
# A study with budgets: the frontier's files (the frontier figures' and claims' input).
FRONTIER = STAGE_OUTPUTS.get("frontier", [])


def stage_output(stage):
    """Its outputs, those with a caption in the workflow's report wrapped."""
    base = ARTIFACT[stage.name]
    files = stage.artifact_files() if stage.is_directory else [""]
    out = []
    for name in files:
        path = f"{base}/{name}" if name else base
        shown = stage.report.get(name)
        if shown:
            caption = f"../report/{shown.caption}"
            path = report(path, caption=caption, category=shown.category, labels=shown.labels)
        out.append(path)
    return out


# A rule made in a loop reads the loop's values when it is defined, never when
# its job runs: its command, whole and quoted (stages.command_line), is a param.
for stage in STAGE_RULES:
    needs = {name: ARTIFACT[name] for name in stage.needs if name in STAGE_OUTPUTS}

    rule:
        name: stage.name
        localrule: True
        conda:
            CONDA_ENV
        input:
            runs=RUNS,
            **{name: STAGE_OUTPUTS[name] for name in needs},
        output:
            stage_output(stage),
        params:
            command=command_line(
                stage, RUNS, ARTIFACT[stage.name], needs, study_values(stage, config["fit"])
            ),
        log:
            f"{OUT}/logs/{stage.name}.log",
        shell:
            "{params.command}" + LOGGED
