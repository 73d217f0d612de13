"""What a fresh process pays before it computes (docs/reference.md, "Where the time goes"): a `bench run` on a
static graph imports none of the heavy modules it has no use for. The first gradient through torch.func imports
torch._dynamo (0.7-1 s), so the vectorised path differentiates a vmapped forward with plain autograd;
cross-entropy under vmap avoids the decomposition that imports sympy; the metrics are written without pandas and
the topology checks without scipy. If a change makes a run import one of these again, the test names it."""
import json
import subprocess
import sys

import pytest

from bench.cli import main

pytestmark = pytest.mark.slow  # fresh interpreters: `make test` runs them, `make test-fast` does not

# heavy modules a run on a static graph has no use for, and what each cost to import on the 2-core machine
NOT_NEEDED = {"torch._dynamo": "0.7-1 s", "sympy": "0.3 s", "pandas": "0.3 s", "scipy": "0.2 s"}

RUN = """
import json, sys
from bench.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": [m for m in %r if m in sys.modules]}))
""" % (sorted(NOT_NEEDED),)


def test_a_vectorised_run_imports_none_of_the_modules_it_does_not_need(tmp_path):
    args = ["run", "--task", "mnist1d-mlp", "--algorithm", "choco", "--compressor", "top:0.1", "--topology", "ring",
            "--nodes", "4", "--epochs", "1", "--set", "task_options.n_train=400", "--set", "task_options.n_test=100",
            "--set", "task_options.vectorize=true", "--quiet", "--out"]
    # the first run generates MNIST-1D (mnist1d needs scipy) and caches it; the probe is the run after
    assert main([*args, str(tmp_path / "first")]) == 0
    args.append(str(tmp_path / "run"))
    out = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["loaded"] == [], {m: NOT_NEEDED[m] for m in report["loaded"]}
    assert (tmp_path / "run" / "metrics.parquet").stat().st_size > 0
