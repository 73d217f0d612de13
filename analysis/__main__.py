"""``python -m analysis``: see analysis/cli.py."""
import gc
import sys

gc.disable()  # no cyclic collection while pandas and the analysis import
from analysis.cli import main  # noqa: E402

gc.freeze()  # what the imports left alive is never scanned again
gc.enable()
sys.exit(main())
