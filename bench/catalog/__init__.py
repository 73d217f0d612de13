"""What the suite offers, by name, without torch: the algorithms, compression operators and training tasks
with the knobs each accepts and the checks of how they combine.

A study's DAG is built from these alone (bench/pipeline), so `snakemake -n` and `bench plan`'s parsing
never import torch. The implementations inherit their entry: an algorithm class of bench/algorithms is its
catalog class plus the maths, an operator of bench/compressors its spec class plus the encoding; so a flag,
an option or an error message is written once, here.
"""
