# Choco-Gossip against exact gossip on the consensus problem: one job per method, then the
# summary table (the figure is drawn by the `figure` rule like every other one). Not --quiet: off a
# terminal `bench consensus` writes one line per method into the job's log.
import os


rule consensus_method:
    output:
        f"{OUT}/consensus/{{method}}/traces.csv",
    log:
        f"logs/{STUDY}/consensus/{{method}}.log",
    params:
        spec=lambda wc: CONSENSUS_METHODS[wc.method],
        topology=CONSENSUS.get("topology"),
        nodes=CONSENSUS.get("nodes"),
        dim=CONSENSUS.get("dim"),
        steps=CONSENSUS.get("steps"),
        seed=CONSENSUS.get("seed"),
        out=lambda wc, output: os.path.dirname(output[0]),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m bench consensus --methods {params.spec:q} --topology {params.topology:q} --nodes {params.nodes:q} "
        "--dim {params.dim:q} --steps {params.steps:q} --seed {params.seed:q} --out {params.out:q} "
        "> {log} 2>&1"


rule consensus_summary:
    input:
        consensus_traces(),
    output:
        csv=f"{OUT}/consensus/summary.csv",
        md=f"{OUT}/consensus/summary.md",
    log:
        f"logs/{STUDY}/consensus/summary.log",
    params:
        out=lambda wc, output: os.path.dirname(output.csv),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis.consensus {input:q} --out {params.out:q} > {log} 2>&1"


