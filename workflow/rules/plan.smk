# The rehearsal and the plan (`--config plan=true`): `bench plan` times every run shape of the study's
# jobs for a few steps on synthetic data and writes results/<study>/plan.csv, from which the training
# jobs' runtime is then taken. Submitted like a training job, so under the slurm profile it is timed
# on a GPU node.
import shlex


rule plan:
    output:
        f"{OUT}/plan.csv",
    log:
        f"logs/{STUDY}/plan.log",
    params:
        studies=" ".join(f"--configfile {shlex.quote(os.path.abspath(f))}" for f in workflow.configfiles),
        scale=SCALE,
        safety=config.get("plan_safety", 1.5),
    resources:
        mem_mb=TASK["mem_mb"],
        runtime=60,
        gpu=TASK["gpus"],
        cpus_per_task=TASK["cpus"],
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m bench plan {params.studies} --scale {params.scale:q} --safety {params.safety:q} --out {output:q} "
        "> {log} 2>&1"
