# Tuning: for every cell of a study with a `tune:` grid, one job trains all its trials (a fraction
# of the epochs, on the training set minus a validation split), one job picks the winner by
# validation accuracy into results/<study>/tuned/<cell>.yaml, and the final runs read it.


rule tune_cell:
    # Like run_cell: the trial directories are never deleted, so an interrupted job resumes them.
    output:
        touch(tune_marker("{cell}")),
    log:
        f"logs/{STUDY}/tune/{{cell}}.log",
    params:
        commands=lambda wc: " && ".join(
            S.command(settings, f"{OUT}/tune/{wc.cell}/{name}") for name, settings in S.trials(wc.cell).items()
        ),
    threads: lambda wc: S.processes(CELLS[wc.cell])
    resources:
        **job_resources("tune_cell", lambda wc: (wc.cell, CELLS[wc.cell])),
    conda:
        "../envs/bench.yaml"
    shell:
        "({params.commands}) > {log} 2>&1"


rule select_cell:
    input:
        tune_marker("{cell}"),
    output:
        f"{OUT}/tuned/{{cell}}.yaml",
    log:
        f"logs/{STUDY}/tune/{{cell}}.select.log",
    params:
        trials=lambda wc: f"{OUT}/tune/{wc.cell}",
        knobs=lambda wc: TUNED_CELLS[wc.cell],
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis tune select {params.trials:q} --keys {params.knobs:q} --out {output:q} > {log} 2>&1"


rule tuned_table:
    input:
        [f"{OUT}/tuned/{cell}.yaml" for cell in TUNED_CELLS],
    output:
        f"{OUT}/tuned.csv",
    log:
        f"logs/{STUDY}/tune/table.log",
    params:
        study=lambda wc, output: os.path.dirname(output[0]),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis tune table {params.study:q} > {log} 2>&1"
