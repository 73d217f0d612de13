# Choco-Gossip against exact gossip on the consensus problem (γ tuned per compressor).


rule consensus:
    output:
        traces=f"{OUT}/consensus/traces.csv",
        summary=f"{OUT}/consensus/summary.csv",
    log:
        f"logs/{STUDY}/consensus.log",
    params:
        c=config.get("consensus", {}),
    shell:
        "bench consensus --topology {params.c[topology]} --nodes {params.c[nodes]} "
        "--dim {params.c[dim]} --steps {params.c[steps]} --tune-steps {params.c[tune_steps]} "
        "--compressors '{params.c[compressors]}' --seed {params.c[seed]} --quiet "
        "--out {OUT}/consensus 2> {log} | tee {OUT}/consensus/table.txt"


rule consensus_figure:
    input:
        rules.consensus.output.traces,
    output:
        png=f"{OUT}/figures/consensus.png",
        pdf=f"{OUT}/figures/consensus.pdf",
    log:
        f"logs/{STUDY}/consensus_figure.log",
    shell:
        "python -m analysis.figures.consensus {input} --out {OUT}/figures/consensus 2> {log}"
