# Training runs: one job per run, or one job per cell holding all its seeds (group_seeds: true).
# A run directory that is interrupted keeps its checkpoint, so a restarted pipeline resumes it.
# Runs with backend: dist are launched with torchrun and reserve one core per process.
# Each `bench run` gets its run's settings as one JSON value (`--settings`), the values of the RunConfig
# validated when the DAG was built (bench/pipeline/study.py, Study.job_settings).
# A run's log is its progress: one line per evaluation (step/total, epoch, loss, accuracy, consensus
# distance, elapsed, ETA), γ tuning and data preparation, and the closing status line, flushed as
# written so that a SLURM job's log can be followed while it runs.


if S.group_seeds:

    rule run_cell:
        # The marker is the only declared output: the run directories are never deleted by Snakemake,
        # so a cell interrupted after some seeds keeps them and `bench run` skips what is finished.
        input:
            lambda wc: tuned_values(wc.cell),
        output:
            touch(cell_marker("{cell}")),
        log:
            f"logs/{STUDY}/runs/{{cell}}.log",
        params:
            commands=lambda wc: " && ".join(run_command(f"{wc.cell}_s{seed}", wc.cell) for seed in SEEDS),
        threads: lambda wc: S.processes(CELLS[wc.cell])
        resources:
            **job_resources("run_cell", lambda wc: (wc.cell, CELLS[wc.cell])),
        conda:
            "../envs/bench.yaml"
        shell:
            "({params.commands}) > {log} 2>&1"

else:

    rule run:
        input:
            lambda wc: tuned_values(RUN_CELL[wc.run]),
        output:
            run_outputs("{run}"),
        log:
            f"logs/{STUDY}/runs/{{run}}.log",
        params:
            command=lambda wc: run_command(wc.run, RUN_CELL[wc.run]),
        threads: lambda wc: S.processes(RUNS[wc.run])
        resources:
            **job_resources("run", lambda wc: (wc.run, RUNS[wc.run])),
        conda:
            "../envs/bench.yaml"
        shell:
            "{params.command} > {log} 2>&1"
