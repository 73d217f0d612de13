"""A rehearsal and a plan before a cluster run: `bench plan` enumerates every job a study submits,
times each distinct run shape for a few real steps on synthetic data, and turns the real data sizes
into steps, evaluations and hours per job (results/<study>/plan.csv); the pipeline sizes each SLURM
job's runtime from that file. Importing this package is light (the pipeline reads plan.csv through it)."""


def cmd_plan(args) -> int:
    from .command import cmd_plan as run

    return run(args)
