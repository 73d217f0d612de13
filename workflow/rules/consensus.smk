# Choco-Gossip against exact gossip on the consensus problem: one job per method, then the
# summary table (the figure is drawn by the `figure` rule like every other one).


rule consensus_method:
    output:
        f"{OUT}/consensus/{{method}}/traces.csv",
    log:
        f"logs/{STUDY}/consensus/{{method}}.log",
    params:
        c=config.get("consensus", {}),
        spec=lambda wc: CONSENSUS_METHODS[wc.method],
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m bench consensus --methods '{params.spec}' --topology {params.c[topology]} --nodes {params.c[nodes]} "
        "--dim {params.c[dim]} --steps {params.c[steps]} --seed {params.c[seed]} --quiet "
        "--out $(dirname {output}) > {log} 2>&1"


rule consensus_summary:
    input:
        consensus_traces(),
    output:
        csv=f"{OUT}/consensus/summary.csv",
        md=f"{OUT}/consensus/summary.md",
    log:
        f"logs/{STUDY}/consensus/summary.log",
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis.consensus {input} --out $(dirname {output.csv}) > {log} 2>&1"


