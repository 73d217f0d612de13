"""Shared test set-up."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/datafiles.py
# pytest rewrites the asserts of every test module it imports, about half of a worker's 10 s of collection, and
# where PYTHONDONTWRITEBYTECODE is set (as in many container images) it never keeps the result. The tests' own
# modules keep theirs (tests/__pycache__/, ignored by git), so a second `make test` or `make test-fast` reads
# them; the processes the tests start write what the environment says (make compiles bench/ and analysis/).
sys.dont_write_bytecode = False
# The processes the tests start (bench runs, Snakemake's jobs, ranks, bench perf) each default to one OpenMP
# thread per core; under `make test` two workers already fill both cores, and the extra threads only spin
# (7 % more CPU for the pipeline and perf tests, measured). Their results do not depend on the thread count:
# one thread each, as the tests' own process runs (one_thread below). Set before torch (and with it numpy's
# OpenBLAS, which reads them once, when it loads) is imported, so this process's own BLAS calls take one too.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"
import pytest  # noqa: E402
import torch  # noqa: E402
from suite_hooks import pytest_runtest_makereport  # noqa: F401 (the hook)



@pytest.fixture(autouse=True, scope="session")
def one_thread():
    # The tests use small tensors, which run faster on one thread; with the CPU shared by other
    # jobs, OpenMP's spinning threads made a ResNet-20 step ~50x slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def method_labels():
    # analysis learns algorithms' names from the runs it loads; each test starts from what bench's
    # registered algorithms say of themselves, whatever earlier tests loaded
    from analysis import labels
    from bench.algorithms import ALGORITHMS

    labels.reset()
    for name in ALGORITHMS.names():
        labels.learn(name, ALGORITHMS.get(name).describe())
    yield


@pytest.fixture(autouse=True)
def no_figure_left_open():
    # a test that stands in for a figure's save keeps its figure open; the next ones would pile up (matplotlib
    # warns past 20): each test closes what it opened
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    # tuned γ values and generated data sets are cached; tests never touch the user's cache
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="session")
def interrupted_study(tmp_path_factory):
    """config/test.yaml interrupted, finished and reported, once per session (tests/shared_studies.py)."""
    from shared_studies import interrupted_test_study, once

    return once(tmp_path_factory, "interrupted-test-study", interrupted_test_study)


@pytest.fixture(scope="session")
def study_dags(tmp_path_factory):
    """`<study>@<scale>` -> its dry run, every study of config/ built once per session (tests/snakemake_api.py)."""
    from shared_studies import once
    from snakemake_api import every_dag

    return once(tmp_path_factory, "study-dags", every_dag)[1]
