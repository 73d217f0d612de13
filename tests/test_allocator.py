"""The C allocator of a command-line process (bench/allocator.py): a large block freed and asked for again reuses
the pages already mapped instead of page-faulting fresh ones, and only where the process asked for it."""
import json
import subprocess
import sys

import pytest

PROBE = """
import json, resource, sys
import torch
if sys.argv[1] == "kept":
    from bench.allocator import keep_freed_memory
    assert keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def touched():  # a 64 MB block, every page written
    before = faults()
    block = torch.ones(16 * 2**20)
    return block, faults() - before
block, first = touched()
del block
block, second = touched()
print(json.dumps({"first": first, "second": second}))
"""


def _faults(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt and minor-fault counts are glibc/Linux's")
def test_a_freed_large_block_is_reused_without_page_faults_only_where_asked():
    kept, default = _faults("kept"), _faults("default")
    # both processes fault the first block's pages in (16,384 of 4 kB; fewer with huge pages)
    assert kept["first"] > 0 and default["first"] > 0
    # asked: the second block is the first one's pages; by default malloc unmapped them and maps fresh ones
    assert kept["second"] <= 0.1 * kept["first"]
    assert default["second"] >= 0.5 * default["first"]
