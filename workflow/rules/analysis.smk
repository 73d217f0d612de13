# Analysis of the finished runs: summary table, one job per figure, the Markdown report and the results browser.
import os


rule summarize:
    input:
        run_targets(),
    output:
        csv=f"{OUT}/summary.csv",
        parquet=f"{OUT}/summary.parquet",
        points=f"{OUT}/points.parquet",  # the study's tidy table: one row per run × evaluation
    log:
        f"logs/{STUDY}/summarize.log",
    params:
        target=config.get("analysis", {}).get("target_rel", 0.95),
        out=lambda wc, output: os.path.dirname(output.csv),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis summarize {params.out:q} --target-rel {params.target:q} > {log} 2>&1"


rule figure:
    wildcard_constraints:
        figure="|".join(FIGURES) or "none",
    input:
        summary=rules.summarize.output.csv if RUNS else [],
        traces=consensus_traces(),
        tuned=[f"{OUT}/tuned.csv"] if TUNED_CELLS else [],
    output:
        png=report(f"{OUT}/figures/{{figure}}.png", caption="../report/figure.rst",
                   category=lambda wc: FIGURE_CATEGORIES[wc.figure]),
        pdf=f"{OUT}/figures/{{figure}}.pdf",
    log:
        f"logs/{STUDY}/figures/{{figure}}.log",
    params:
        out=lambda wc, output: os.path.dirname(os.path.dirname(output.png)),
        # read when `snakemake --report` renders figure.rst: the caption drawn for these runs, escaped
        caption=lambda wc, output: figure_caption(output.png, wc.figure),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis figures {params.out:q} --only {wildcards.figure:q} > {log} 2>&1"


rule report:
    input:
        rules.summarize.output.csv,
        [f"{OUT}/tuned.csv"] if TUNED_CELLS else [],
        expand(f"{OUT}/figures/{{figure}}.png", figure=FIGURES),
    output:
        md=f"{OUT}/report.md",
        # report.md as one page (tables, the paper's claims, figures inlined), shown first by `snakemake --report`
        html=report(f"{OUT}/report.html", caption="../report/tables.rst", category=TABLES_CATEGORY),
    log:
        f"logs/{STUDY}/report.log",
    params:
        out=lambda wc, output: os.path.dirname(output.md),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis report {params.out:q} > {log} 2>&1"


rule browser:
    input:
        rules.summarize.output.csv,
        rules.summarize.output.points,
    output:
        # the runs to filter, group and overlay, and the cells with their intervals: one page, opens offline
        f"{OUT}/browser.html",
    log:
        f"logs/{STUDY}/browser.log",
    params:
        out=lambda wc, output: os.path.dirname(output[0]),
    conda:
        "../envs/bench.yaml"
    shell:
        "python -m analysis browse {params.out:q} --out {output:q} > {log} 2>&1"
