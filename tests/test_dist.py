"""The torch.distributed runtime (gloo, CPU) behind the same algorithm code: equivalence with the
simulator, real payload bytes, hybrid processes, torchrun, and a rank killed mid-run."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench.algorithms import parse_options
from bench.cli import main
from bench.errors import BenchError

pytestmark = pytest.mark.slow  # processes and pipelines: `make test` runs them, `make test-fast` does not

TIMING = ["wall_s", "time_compute_s", "time_comm_s", "time_s"]  # measured in dist, modelled in sim
SETTINGS = {"task": "lsq", "topology": "ring", "nodes": 4, "epochs": 2, "seed": 5, "lr": 0.05, "eval_every": 0.5,
            "momentum": 0.5, "gamma": 0.4, "batch_size": 8, "eval_local_workers": 4}


def as_sets(settings: dict) -> list[str]:
    """``bench run`` arguments giving ``settings``, quiet."""
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")] + ["--quiet"]


BASE = as_sets(SETTINGS)
# the every-method equivalence launches: one epoch of batches of 16 (15 steps, 3 evaluations), a quarter of the
# steps of SETTINGS. Every method's state has gone round the ring several times by then, and it stops short of where
# BEER parts from the simulator: with sign it takes the sign of its copies' errors, which shrink towards 0, where a
# last-bit difference flips a sign; at the fifth evaluation of two epochs the suboptimality differed by 17 % (6.7e-5
# against 7.8e-5), and BEER's tracker carried QSGD's one-level flips to a 2-5.6 % difference in the consensus
# distance. Bits stay exact whatever the length.
CASE_SETTINGS = {**SETTINGS, "batch_size": 16, "epochs": 1}
CASE_BASE = as_sets(CASE_SETTINGS)
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _per_link(cls) -> bool:
    """Whether the method keeps a copy per link on a time-varying graph (built on a tiny one-peer-exp to see)."""
    import torch

    from bench.comm import SimulatedCommunicator
    from bench.compressors import make_compressor
    from bench.topology import make_topology

    options = {"gamma": 0.5} if "gamma" in cls.knobs() else {}
    algo = cls(torch.zeros(4, 3), SimulatedCommunicator(make_topology("one-peer-exp", 4)),
               compressor=make_compressor("sign", contraction=cls.contraction), options=parse_options(cls, options))
    return getattr(algo, "links", None) is not None


def _cases(time_varying: bool) -> list[tuple[str, str]]:
    """Every registered algorithm that runs under --backend dist with every compressor family it accepts (the
    family's first example, its options left to the method): its maths in both runtimes, each operator's encoding
    and random draws through torch.distributed. On one-peer-exp (``time_varying``): the methods that keep copies
    per link, with the compressing families but QSGD (BEER's tracker carries QSGD's one-level flips of a last-bit
    difference past the 3 % the comparison allows; QSGD's encoding is checked on the ring). No list of names: a
    new method or operator is in."""
    from bench.algorithms import ALGORITHMS
    from bench.compressors import COMPRESSORS, parse_compressor

    cases = []
    for name in ALGORITHMS.names():
        cls = ALGORITHMS.get(name)
        try:
            cls.check_backend("dist")
            cls.check_topology("one-peer-exp" if time_varying else "ring", time_varying, None)
        except BenchError:
            continue
        if time_varying and (cls.centralized or not cls.compresses or not _per_link(cls)):
            continue
        for family in COMPRESSORS.names():
            if time_varying and family in ("none", "qsgd"):
                continue
            spec = COMPRESSORS.get(family).examples[0].split(",")[0]
            try:
                cls.check_compressor(parse_compressor(spec, contraction=cls.contraction))
            except BenchError:
                continue
            cases.append((name, spec))
    return cases


CASES = _cases(time_varying=False)
# the methods that keep copies per link on a time-varying graph: one-peer-exp (n = 4, period 2), one worker a process,
# so a link's two ends are in two processes (tests/test_time_varying.py has 2 workers a process)
ONE_PEER_CASES = _cases(time_varying=True)

def bench(*argv, check=True, env=None):
    proc = subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True, text=True, env=env or ENV,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def metrics(path):
    return pd.read_parquet(Path(path) / "metrics.parquet")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script_args, world, **popen):
    port = _free_port()
    return [subprocess.Popen([sys.executable, *script_args], env={
        **ENV, "RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port)}, **popen) for r in range(world)]


def launch_cases(out, cases, settings):
    """Every (algorithm, compressor) of ``cases`` on 4 gloo processes, one worker each, in a single launch."""
    runs = {f"{a}-{c}": {"algorithm": a, "compressor": c, **settings} for a, c in cases}
    ranks = launch([str(Path(__file__).with_name("dist_cases.py")), str(out), json.dumps(runs)], 4,
                   stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
    errors = [p.communicate(timeout=600)[1] for p in ranks]
    assert all(p.returncode == 0 for p in ranks), "\n".join(e[-1500:] for e in errors)
    return out


@pytest.fixture(scope="module")
def dist_runs(tmp_path_factory):
    return launch_cases(tmp_path_factory.mktemp("dist"), CASES, CASE_SETTINGS)


@pytest.fixture(scope="module")
def dist_runs_one_peer(tmp_path_factory):
    return launch_cases(tmp_path_factory.mktemp("dist-one-peer"), ONE_PEER_CASES,
                        {**CASE_SETTINGS, "topology": "one-peer-exp"})


@pytest.mark.parametrize("algorithm,compressor", CASES)
def test_four_gloo_processes_reproduce_the_simulation(dist_runs, tmp_path, algorithm, compressor):
    sim, dist = compare_with_simulation(dist_runs, tmp_path, algorithm, compressor, CASE_BASE)
    # bits are exact whatever the runtime
    assert list(sim["bits_per_worker"]) == list(dist["bits_per_worker"])
    assert list(sim["bits_per_worker_max"]) == list(dist["bits_per_worker_max"])


@pytest.mark.parametrize("algorithm,compressor", ONE_PEER_CASES)
def test_four_gloo_processes_reproduce_the_simulation_on_the_one_peer_graph(dist_runs_one_peer, tmp_path,
                                                                             algorithm, compressor):
    """Per-link copies at both ends of a link, in two processes, agree with the simulator's one copy per link."""
    sim, dist = compare_with_simulation(dist_runs_one_peer, tmp_path, algorithm, compressor,
                                        [*CASE_BASE, "--set", "topology=one-peer-exp"])
    assert list(sim["bits_per_worker"]) == list(dist["bits_per_worker"])
    run_dir = dist_runs_one_peer / f"{algorithm}-{compressor}"
    runtime = json.loads((run_dir / "run.json").read_text())["runtime"]
    links = {(link["src"], link["dst"]): link["bytes"] for link in runtime["link_bytes_rank0"]}
    # worker 0 sends to 3 (rounds 0, 2, …) and to 2 (rounds 1, 3, …), one message a link and round (BEER two)
    assert set(links) == {(0, 3), (0, 2)} and sum(links.values()) == runtime["bytes_sent_rank0"]
    assert runtime["bytes_sent_rank0"] * 8 == metrics(run_dir)["bits_per_worker"].iloc[-1] > 0


def compare_with_simulation(dist_runs, tmp_path, algorithm, compressor, base):
    """Asserts the metrics agree to float rounding (timing aside) and the run completed; returns (sim, dist)."""
    argv = [*base, "--algorithm", algorithm, "--compressor", compressor]
    assert main(["run", *argv, "--out", str(tmp_path / "sim")]) == 0
    sim, dist = metrics(tmp_path / "sim"), metrics(dist_runs / f"{algorithm}-{compressor}")
    assert list(sim["step"]) == list(dist["step"])
    # The runtimes add in different orders (shifted adds vs a sparse product, gradients of 4 rows vs 1), so
    # x agrees to the last bits only. QSGD's stochastic rounding compares against those bits: a one-ulp
    # difference can move one coordinate by one level, a small but not float-sized change.
    rtol = 3e-2 if compressor.startswith("qsgd") else 1e-4
    assert len(sim) == 3  # every evaluation, BEER's included (CASE_SETTINGS says why the launches stop there)
    for column in sim.columns:
        if column in TIMING:
            continue
        pd.testing.assert_series_equal(sim[column], dist[column], rtol=rtol, atol=1e-6,
                                       check_names=False, obj=f"{algorithm}/{compressor} {column}")
    info = json.loads((dist_runs / f"{algorithm}-{compressor}" / "run.json").read_text())
    assert info["status"] == "completed" and info["runtime"]["processes"] == 4
    assert info["runtime"]["measured_comm_s"] > 0 and info["runtime"]["predicted_comm_s"] > 0
    return sim, dist


@pytest.mark.parametrize("algorithm,compressor", CASES)
def test_bytes_handed_to_torch_distributed_equal_the_simulators_count_per_link(dist_runs, algorithm, compressor):
    """One worker per process: everything worker 0 puts on its links goes through torch.distributed (its gossip
    copies to both ring neighbours, each link's own message, its share of the ring collectives), and that is the
    count both runtimes report (the ring is regular, so worker 0's is the mean and the max)."""
    run_dir = dist_runs / f"{algorithm}-{compressor}"
    runtime = json.loads((run_dir / "run.json").read_text())["runtime"]
    df = metrics(run_dir)
    assert (df["bits_per_worker_max"] == df["bits_per_worker"]).all()
    assert runtime["bytes_sent_rank0"] * 8 == df["bits_per_worker"].iloc[-1] > 0
    links = {(link["src"], link["dst"]): link["bytes"] for link in runtime["link_bytes_rank0"]}
    if links:  # gossip and exchanges: the same bytes on each of worker 0's two links, nothing else
        assert set(links) == {(0, 1), (0, 3)} and links[(0, 1)] == links[(0, 3)]
        assert sum(links.values()) == runtime["bytes_sent_rank0"]
        times = runtime["link_times_rank0"]  # measured per incoming link, beside the model
        assert {(t["src"], t["dst"]) for t in times} == {(1, 0), (3, 0)}
        assert all(t["measured_arrival_s"] > 0 and t["model_arrival_s"] > 0 for t in times)


def test_hybrid_processes_hold_several_workers(tmp_path):
    argv = [*BASE, "--set", "nodes=8", "--algorithm", "choco", "--compressor", "sign"]
    assert main(["run", *argv, "--out", str(tmp_path / "sim")]) == 0
    bench("run", *argv, "--backend", "dist", "--set", "procs=2", "--out", str(tmp_path / "dist"))
    sim, dist = metrics(tmp_path / "sim").drop(columns=TIMING), metrics(tmp_path / "dist").drop(columns=TIMING)
    pd.testing.assert_frame_equal(sim, dist, rtol=1e-4, atol=1e-6)
    assert json.loads((tmp_path / "dist" / "run.json").read_text())["runtime"]["workers_per_process"] == 4


def test_processes_holding_some_workers_augment_and_normalise_as_the_simulation(tmp_path):
    """ResNet-8 on CIFAR-format files: crop-and-flip draws, per-worker BatchNorm statistics and
    their average are the same when 2 processes hold 2 workers each as in one simulation."""
    from datafiles import write_cifar

    write_cifar(tmp_path / "data" / "cifar-10-batches-py", per_batch=8)
    argv = ["--task", "cifar10-resnet8", "--algorithm", "choco", "--compressor", "sign", "--topology", "ring",
            "--nodes", "4", "--epochs", "1", "--seed", "2", "--set", "batch_size=2", "--set", "gamma=0.3",
            "--set", "eval_every=0.5", "--set", "lr=0.05", "--set", f"data_root={tmp_path / 'data'}",
            "--set", "task_options.vectorize=true", "--set", "eval_local_workers=4", "--quiet"]
    assert main(["run", *argv, "--out", str(tmp_path / "sim")]) == 0
    bench("run", *argv, "--backend", "dist", "--set", "procs=2", "--out", str(tmp_path / "dist"))
    sim, dist = metrics(tmp_path / "sim").drop(columns=TIMING), metrics(tmp_path / "dist").drop(columns=TIMING)
    pd.testing.assert_frame_equal(sim, dist, rtol=1e-4, atol=1e-5)


def test_a_graph_that_cannot_be_built_is_one_line_before_any_rank_starts(tmp_path, capsys):
    """Found by the launcher (bench.run.resolved.resolve_run), not by every rank after the launch: one line, status
    2, nothing written; not a failed launch that says the same command resumes."""
    argv = ["run", *BASE, "--algorithm", "dpsgd", "--compressor", "none", "--backend", "dist", "--set", "nodes=2"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["bench: error: ring needs n >= 3; got n=2"]
    assert not (tmp_path / "run").exists()


def test_a_run_started_from_python_launches_its_ranks_without_a_command_line(tmp_path, monkeypatch):
    """`bench.run.start` with backend dist and no argv: the ranks read its settings from a file (none is left
    behind) and train what one process simulates."""
    import tempfile

    from bench.run import start

    settings = {**SETTINGS, "algorithm": "choco", "compressor": "sign", "quiet": True}
    assert start(settings, tmp_path / "sim") == 0
    # a temporary folder of this test's own: other tests launching ranks at the same time write to the shared one
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    before = set(private.glob("bench-ranks-*"))
    assert before == set()
    assert start({**settings, "backend": "dist", "procs": 2}, tmp_path / "dist") == 0
    sim, dist = metrics(tmp_path / "sim").drop(columns=TIMING), metrics(tmp_path / "dist").drop(columns=TIMING)
    pd.testing.assert_frame_equal(sim, dist, rtol=1e-4, atol=1e-6)
    info = json.loads((tmp_path / "dist" / "run.json").read_text())
    assert info["status"] == "completed" and info["runtime"]["processes"] == 2
    assert info["config"] == {**json.loads((tmp_path / "sim" / "run.json").read_text())["config"],
                              "backend": "dist", "procs": 2}
    assert set(private.glob("bench-ranks-*")) == before  # the settings file is removed


def test_a_small_global_sum_goes_through_rank_0_in_rank_order_and_every_rank_gets_its_bits(tmp_path):
    """Reads of the losses and flags (a few numbers) go to process 0 and back, not round gloo's ring: every process
    holds the same bits, process 0's sum of the parts in rank order, and the group works on afterwards."""
    import torch

    ranks = launch([str(Path(__file__).with_name("dist_star.py")), str(tmp_path)], 5,
                   stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
    errors = [p.communicate(timeout=120)[1] for p in ranks]
    assert all(p.returncode == 0 for p in ranks), "\n".join(e[-1500:] for e in errors)
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(5)]
    expected = got[0]["part"].clone()
    for r in range(1, 5):
        expected += got[r]["part"]
    # in rank order 1 + 1e8 loses the 1 (float32), so the sum is 1, not the exact 2: the order shows
    assert float(expected[0]) == 1.0
    for r in range(5):
        assert torch.equal(got[r]["total"], expected)
        assert got[r]["after"].tolist() == [10.0, 10.0]


def test_torchrun_launch(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "bench", "run", *BASE, "--algorithm", "choco", "--compressor", "sign", "--backend", "dist",
           "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "completed" and info["runtime"]["processes"] == 2


# the interrupted runs: 8 epochs of 31 steps, a checkpoint each; a signal or kill comes after a checkpoint, with
# epochs to spare (startup costs a launch several epochs, so more would buy only margin)
EPOCHS = 8


def _argv(out, timeout_s, epochs=EPOCHS):
    return ["run", *BASE, "--set", f"epochs={epochs}", "--algorithm", "choco", "--compressor", "sign",
            "--backend", "dist", "--set", f"dist_timeout={timeout_s}", "--set", "checkpoint_every=1",
            "--out", str(out)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The metrics of the interrupted runs' settings run once without a stop (timing aside): what each resumed run
    must end with, to the last bit (sign's last-bit flips part a dist run from the simulator, not from itself)."""
    out = tmp_path_factory.mktemp("whole")
    bench(*_argv(out, 60))
    return metrics(out).drop(columns=TIMING)


def test_a_killed_rank_fails_the_run_quickly_and_a_rerun_resumes(tmp_path, uninterrupted):
    # rank 2 is killed at its first checkpoint (epoch 1), epochs before the end
    argv = _argv(tmp_path, 15)
    ranks = launch(["-m", "bench", *argv], 4, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "checkpoint-rank2.pt").exists() and time.time() < deadline:
        time.sleep(0.05)
    ranks[2].send_signal(signal.SIGKILL)
    killed_at = time.time()
    for proc in ranks:
        proc.wait(timeout=60)
    assert time.time() - killed_at < 20  # the survivors stop within the stated timeout (15 s), no hang
    assert ranks[2].returncode == -signal.SIGKILL and all(p.returncode == 1 for p in ranks[:2] + ranks[3:])
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and info["error"].startswith("rank 0:")
    assert "bench: error: rank 0 stopped at step" in ranks[0].stderr.read()
    before = metrics(tmp_path)
    # the same command, now spawning its own ranks, resumes from the last checkpoint and finishes
    bench(*argv)
    after = metrics(tmp_path)
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "completed"
    assert after["epoch"].iloc[-1] == EPOCHS and after["step"].is_unique and after["step"].is_monotonic_increasing
    # what was measured before the failure is measured again, identically, after the resume
    both = before.merge(after, on="step", suffixes=("_before", "_after"))
    assert len(both) == len(before) >= 2
    pd.testing.assert_series_equal(both["test_loss_before"], both["test_loss_after"], check_names=False, rtol=1e-9)
    pd.testing.assert_frame_equal(after.drop(columns=TIMING), uninterrupted)  # to the last bit


def _ranks_of(launcher: subprocess.Popen, count: int, timeout: float = 120) -> dict[int, int]:
    """{rank: pid} of the ranks ``bench run --backend dist`` started, read from /proc: processes named
    ``bench-rank-N`` (bench/run/rank.py names them) that descend from the launcher."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        parents, names = {}, {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                head, tail = stat.read_text().rsplit(")", 1)
                pid = int(stat.parent.name)
                parents[pid], names[pid] = int(tail.split()[1]), head.split("(", 1)[1]
            except (OSError, IndexError, ValueError):
                continue

        def descends(pid: int) -> bool:
            while pid > 1:
                pid = parents.get(pid, 0)
                if pid == launcher.pid:
                    return True
            return False

        found = {int(name.rsplit("-", 1)[1]): pid for pid, name in names.items()
                 if re.fullmatch(r"bench-rank-\d+", name) and descends(pid)}
        if len(found) == count:
            return found
        time.sleep(0.1)
    pytest.fail(f"the launcher did not start {count} ranks")


def _launched(tmp_path, timeout_s, epochs=40, after_ns=None):
    """The launcher of a run and {rank: pid} of its ranks, once rank 2 has written a checkpoint (another than the
    one whose mtime is ``after_ns``, where the run resumes from one)."""
    launcher = subprocess.Popen([sys.executable, "-m", "bench", *_argv(tmp_path, timeout_s, epochs)], env=ENV,
                                stderr=subprocess.PIPE, text=True)
    ranks = _ranks_of(launcher, 4)
    checkpoint, deadline = tmp_path / "checkpoint-rank2.pt", time.time() + 120

    def written():
        try:
            return checkpoint.stat().st_mtime_ns != after_ns
        except FileNotFoundError:
            return False

    while not written() and time.time() < deadline:
        time.sleep(0.05)
    return launcher, ranks


def test_a_signal_stops_every_rank_at_one_step_and_the_same_command_resumes(tmp_path, uninterrupted):
    """SIGTERM to the launcher (as Snakemake or Ctrl-C sends it; the launcher forwards it), then, in the resumed run,
    to one rank alone: each time every rank stops after the same step, with a checkpoint at that step, and the same
    command finishes the run with the metrics of a run never interrupted. A signal one rank alone caught reaches the
    others' decision through the next read of the losses (bench/run/runner.py)."""
    import torch

    after_ns, steps = None, []
    for to in ("launcher", "one rank"):
        launcher, ranks = _launched(tmp_path, 60, EPOCHS, after_ns)  # the signal comes after a checkpoint
        # each rank leads a session of its own (scheduled as a group of its own: bench/run/dist.py launch_ranks), so
        # only the launcher's forwarding can bring it a signal sent to the launcher
        assert [os.getsid(pid) for pid in ranks.values()] == list(ranks.values())
        assert os.getsid(launcher.pid) != ranks[0]
        os.kill(launcher.pid if to == "launcher" else ranks[2], signal.SIGTERM)
        err = launcher.communicate(timeout=120)[1]
        info = json.loads((tmp_path / "run.json").read_text())
        assert info["status"] == "interrupted", (to, info["status"], err[-2000:])
        step = info["interrupted_at_step"]
        counters = [torch.load(tmp_path / f"checkpoint-rank{r}.pt", weights_only=True)["counters"]["global_step"]
                    for r in range(4)]
        assert counters == [step] * 4 and 0 < step < info["total_steps"], to
        steps.append(step)
        after_ns = (tmp_path / "checkpoint-rank2.pt").stat().st_mtime_ns
    assert steps[0] < steps[1]  # the second stop is in the resumed run
    resumed = bench(*_argv(tmp_path, 60))
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "completed", resumed.stderr[-2000:]
    pd.testing.assert_frame_equal(metrics(tmp_path).drop(columns=TIMING), uninterrupted)  # to the last bit


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has stopped (an orphan's reaper may be slow to collect it)


def test_ranks_stop_when_their_launcher_is_killed_outright(tmp_path):
    """Each rank leads a session of its own, so a SIGKILL of the launcher (or of its process group) reaches none of
    them: the kernel sends each rank SIGTERM when its launcher ends (bench/run/dist.py ``stop_with_parent``).
    Every rank stops, with a checkpoint, instead of training on unwatched."""
    launcher, ranks = _launched(tmp_path, 60, epochs=40)
    assert all(_alive(pid) for pid in ranks.values())
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.communicate(timeout=30)
    deadline = time.time() + 60
    while any(_alive(pid) for pid in ranks.values()) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in ranks.values())
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "interrupted" and 0 < info["interrupted_at_step"] < info["total_steps"]


def test_a_killed_rank_0_is_recorded_by_the_launcher(tmp_path):
    """Rank 0 writes run.json; killed, it cannot say the run failed: the launcher does, and exits 1."""
    launcher, ranks = _launched(tmp_path, 15)
    os.kill(ranks[0], signal.SIGKILL)
    err = launcher.communicate(timeout=60)[1]
    assert launcher.returncode == 1, err[-2000:]
    info = json.loads((tmp_path / "run.json").read_text())
    # the kill of rank 0 is what the launcher records first; on a busy machine a peer may not notice within the
    # grace and is named as killed after it (bench.run.dist.launch_ranks), never anything else
    assert info["status"] == "failed", info
    first, *rest = info["error"].split("; ")
    assert first == "launcher: rank 0 was killed by SIGKILL", info["error"]
    assert all(re.fullmatch(r"ranks? [0-9, and]+ did not stop within \S+ s and (was|were) killed", r) for r in rest), rest
    assert f"bench: error: {tmp_path}: rank 0 was killed by SIGKILL" in err and "Traceback" not in err


def test_a_hung_rank_is_noticed_after_one_timeout_not_two(tmp_path):
    """A stopped rank never exits: its peers time out after dist_timeout and stop; the launcher then
    kills it after a short grace (bench.run.dist.GRACE_S), not after a second dist_timeout."""
    from bench.run.dist import GRACE_S

    timeout_s = 10  # ranks take a few ms a step: 10 s of silence is a hang even on a loaded machine
    launcher, ranks = _launched(tmp_path, timeout_s)
    os.kill(ranks[0], signal.SIGSTOP)  # rank 0 hangs: nobody but the launcher can write the end
    stopped_at = time.time()
    err = launcher.communicate(timeout=4 * timeout_s)[1]
    waited = time.time() - stopped_at
    assert launcher.returncode == 1, err[-2000:]
    assert timeout_s <= waited + 1 and waited < timeout_s + GRACE_S + 0.5 * timeout_s, waited
    info = json.loads((tmp_path / "run.json").read_text())
    # the first to fail is a peer whose collective timed out; rank 0 is named as the one killed
    assert info["status"] == "failed" and info["error"].startswith("launcher: rank "), info.get("error")
    assert info["error"].endswith(f"rank 0 did not stop within {GRACE_S:g} s and was killed"), info["error"]
