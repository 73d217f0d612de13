"""What a study asks for: its settings at a scale (scale.py) and its grid expanded into the jobs the
Snakemake pipeline submits (study.py). The pipeline's rules and `bench plan` share it."""
from .scale import SCALES, sized
from .study import Job, Study, expand_block, safe

__all__ = ["SCALES", "Job", "Study", "expand_block", "safe", "sized"]
