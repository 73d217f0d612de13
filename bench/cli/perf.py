"""`bench perf`: the performance benchmarks (bench/perf), one JSON file of figures and a table."""
from __future__ import annotations

from .common import device, output_dir

NAME = "perf"
HELP = "performance benchmarks: results/perf/<name>.json and a table"


def add_arguments(p) -> None:
    p.add_argument("--name", default="latest", help="file name under --out-dir (default: latest)")
    p.add_argument("--out-dir", type=output_dir, default="results/perf")
    p.add_argument("--device", type=device(), default="cpu")
    p.add_argument("--only", default=None, help="comma list of benchmark groups a-h (default: a-d, f, g; e on CUDA; h with --peer)")
    p.add_argument("--peer", action="append", default=None, metavar="NAME=PYTHON",
                   help="group h: compare with a peer library installed for that interpreter, e.g. "
                   "decent-bench=/path/python3.13 (repeatable; peers: decent-bench, decent-dp). Given, h joins "
                   "the default groups; see docs/performance.md")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test of the benchmark itself)")
    p.add_argument("--quiet", action="store_true")


def run(args) -> int:
    from ..perf import cmd_perf

    return cmd_perf(args)
