"""What the suite offers, by name, without torch: the compression operators and training tasks with the knobs
each accepts and the checks of how they combine (the algorithms declare theirs in their own modules,
bench/algorithms/).

An operator of bench/compressors is its spec class here plus the encoding, a task of bench/tasks its entry here
plus the model and data; so a flag, an option or an error message is written once, here.
"""
