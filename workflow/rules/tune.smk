# Tuning: for every cell of a study with a `tune:` grid, one job tunes it by successive halving (every
# grid point to a short budget on the training set minus a validation split, the best third continued
# from its checkpoint, the best of those to the full schedule; bench/pipeline/halving.py), one job picks
# the winner on the full budget into results/<study>/tuned/<cell>.yaml, and the final runs read it.


rule tune_cell:
    # Like run_cell: the trial directories are never deleted, so an interrupted job resumes them.
    output:
        touch(tune_marker("{cell}")),
    log:
        f"logs/{STUDY}/tune/{{cell}}.log",
    params:
        plan=lambda wc: json.dumps(S.halving_plan(wc.cell, f"{OUT}/tune/{wc.cell}")),
    threads: lambda wc: S.processes(CELLS[wc.cell])
    resources:
        **job_resources("tune_cell", lambda wc: (wc.cell, CELLS[wc.cell])),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m bench.pipeline.halving {params.plan:q} > {log} 2>&1"


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
