"""The torch.distributed runtime (gloo, CPU) behind the same algorithm code: equivalence with the simulator (every
method and operator, the one-peer graph, several workers a process, lost and late messages), real payload bytes,
and a run stopped by signals, kills and a hang that the same command resumes (under torchrun too)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from bench.algorithms import ALGORITHMS, parse_options
from bench.errors import BenchError
from bench.run import start
from test_run import metrics

pytestmark = pytest.mark.slow  # processes and pipelines: `make test` runs them, `make test-fast` does not

TIMING = ["wall_s", "time_compute_s", "time_comm_s", "time_s"]  # measured in dist, modelled in sim
SETTINGS = {"task": "lsq", "topology": "ring", "nodes": 4, "epochs": 2, "seed": 5, "lr": 0.05, "eval_every": 0.5,
            "momentum": 0.5, "gamma": 0.4, "batch_size": 8, "eval_local_workers": 4}


def as_sets(settings: dict) -> list[str]:
    """``bench run`` arguments giving ``settings``, quiet."""
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")] + ["--quiet"]


BASE = as_sets(SETTINGS)
# the every-method equivalence runs: one epoch of batches of 16 (15 steps, 3 evaluations), a quarter of the steps
# of SETTINGS. Every method's state has gone round the ring several times by then, and it stops short of where
# BEER parts from the simulator: with sign it takes the sign of its copies' errors, which shrink towards 0, where a
# last-bit difference flips a sign; at the fifth evaluation of two epochs the suboptimality differed by 17 % (6.7e-5
# against 7.8e-5), and BEER's tracker carried QSGD's one-level flips to a 2-5.6 % difference in the consensus
# distance. Bits stay exact whatever the length.
CASE_SETTINGS = {**SETTINGS, "batch_size": 16, "epochs": 1}
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
# so a link's two ends are in two processes
ONE_PEER_CASES = _cases(time_varying=True)
# every fault rule under torch.distributed: losses (reweight: D-PSGD, DeepSqueeze; ack: Choco, BEER), late messages
# (D-PSGD's stale copies, Choco's ack), pairwise gossip and workers away (these at 2 processes only); at one worker
# a process and at two (a lost link inside a process too)
FAULTS = [(f"{a}-{c}-{kind}", a, c, losses, worlds) for kind, losses, methods, worlds in (
    ("lossy", {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 2},
     [("dpsgd", "none"), ("choco", "sign"), ("deepsqueeze", "sign"), ("beer", "sign")], (4, 2)),
    ("late", {"drop": 0.1, "late": 0.3, "staleness": 2}, [("dpsgd", "none"), ("choco", "sign")], (4, 2)),
    ("pairwise", {"pairwise": True, "drop": 0.2}, [("dpsgd", "none")], (2,)),
    ("away", {"active": 0.6, "drop": 0.1}, [("dpsgd", "none")], (2,))) for a, c in methods]
# the interrupted run (test_a_run_stopped_six_ways_...): 2 processes of 2 workers, a checkpoint every half epoch
TIMEOUT_S = 6  # ranks take a few ms a step: 6 s of silence is a hang even on a loaded machine
CHAIN = {**SETTINGS, "epochs": 16, "algorithm": "choco", "compressor": "sign", "procs": 2, "checkpoint_every": 0.5,
         "dist_timeout": TIMEOUT_S}
# every run of the shared launches (one per process count): {name: (processes, settings)}; each test simulates the
# same settings and compares
RUNS = {
    **{f"{a}-{c}": (4, {**CASE_SETTINGS, "algorithm": a, "compressor": c}) for a, c in CASES},
    **{f"one-peer-{a}-{c}": (4, {**CASE_SETTINGS, "topology": "one-peer-exp", "algorithm": a, "compressor": c})
       for a, c in ONE_PEER_CASES},
    **{f"{name}-{world}": (world, {**CASE_SETTINGS, "algorithm": a, "compressor": c, "faults": losses})
       for name, a, c, losses, worlds in FAULTS for world in worlds},
    # several workers a process: 4 (the ring), 2 (the one-peer graph: a link's ends in one process or in two)
    "hybrid-ring": (2, {**SETTINGS, "nodes": 8, "algorithm": "choco", "compressor": "sign"}),
    "hybrid-one-peer": (4, {**CASE_SETTINGS, "nodes": 8, "topology": "one-peer-exp", "algorithm": "dpsgd",
                            "compressor": "none"}),
    # ResNet-8 on CIFAR-format files (the data_root the launch writes): crop-and-flip draws, per-worker BatchNorm
    # statistics and their average, 2 workers a process
    "hybrid-cifar": (2, {"task": "cifar10-resnet8", "algorithm": "choco", "compressor": "sign", "topology": "ring",
                         "nodes": 4, "epochs": 1, "seed": 2, "batch_size": 2, "gamma": 0.3, "eval_every": 0.5,
                         "lr": 0.05, "task_options": {"vectorize": True}, "eval_local_workers": 4}),
    "whole": (2, CHAIN),  # what the interrupted run ends with, to the last bit
}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script_args, world, **popen):
    port = _free_port()
    return [subprocess.Popen([sys.executable, *script_args], env={
        **ENV, "RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port)}, **popen) for r in range(world)]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """Every run of RUNS in one launch of gloo processes per process count (tests/dist_cases.py), both launches at
    once: {name: (folder, processes, settings)} and each launch's folder by its process count."""
    from datafiles import write_cifar

    out = tmp_path_factory.mktemp("dist")
    write_cifar(out / "data" / "cifar-10-batches-py", per_batch=8)
    runs = {name: (world, {**settings, "data_root": str(out / "data")} if "cifar" in name else settings)
            for name, (world, settings) in RUNS.items()}
    launches = {world: launch([str(Path(__file__).with_name("dist_cases.py")), str(out / f"world{world}"),
                               json.dumps({name: s for name, (w, s) in runs.items() if w == world})], world,
                              stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
                for world in sorted({w for w, _ in runs.values()})}
    for ranks in launches.values():
        errors = [p.communicate(timeout=600)[1] for p in ranks]
        assert all(p.returncode == 0 for p in ranks), "\n".join(e[-1500:] for e in errors)
    return SimpleNamespace(runs={name: (out / f"world{w}" / name, w, s) for name, (w, s) in runs.items()},
                           worlds={w: out / f"world{w}" for w in launches})


def simulated(launched, name, tmp_path, rtol=1e-4, atol=1e-6):
    """The launch's run ``name`` against its settings simulated here: every metric to float rounding (timing aside),
    the steps and bits exactly, a completed run.json; returns (sim, dist, the dist run's run.json)."""
    folder, world, settings = launched.runs[name]
    assert start({**settings, "quiet": True}, tmp_path / "sim") == 0
    sim, dist = metrics(tmp_path / "sim"), metrics(folder)
    assert list(sim["step"]) == list(dist["step"])
    for column in sim.columns:
        if column not in TIMING:
            pd.testing.assert_series_equal(sim[column], dist[column], rtol=rtol, atol=atol, check_names=False,
                                           obj=f"{name}: {column}")
    # bits are exact whatever the runtime
    assert list(sim["bits_per_worker"]) == list(dist["bits_per_worker"])
    assert list(sim["bits_per_worker_max"]) == list(dist["bits_per_worker_max"])
    info = json.loads((folder / "run.json").read_text())
    assert info["status"] == "completed" and info["runtime"]["processes"] == world
    assert info["runtime"]["measured_comm_s"] > 0 and info["runtime"]["predicted_comm_s"] > 0
    return sim, dist, info


@pytest.mark.parametrize("name", [*(f"{a}-{c}" for a, c in CASES), *(f"one-peer-{a}-{c}" for a, c in ONE_PEER_CASES)])
def test_four_gloo_processes_reproduce_the_simulation(launched, tmp_path, name):
    """One worker a process. Bytes: everything worker 0 puts on its links goes through torch.distributed (its
    gossip copies to both ring neighbours, each link's own message, its share of the ring collectives), and that
    is the count both runtimes report (the ring is regular, so worker 0's is the mean and the max). On the one-peer
    graph, per-link copies at both ends of a link, in two processes, agree with the simulator's one copy per link."""
    # The runtimes add in different orders (shifted adds vs a sparse product, gradients of 4 rows vs 1), so
    # x agrees to the last bits only. QSGD's stochastic rounding compares against those bits: a one-ulp
    # difference can move one coordinate by one level, a small but not float-sized change.
    sim, dist, info = simulated(launched, name, tmp_path, rtol=3e-2 if "qsgd" in name else 1e-4)
    assert len(sim) == 3  # every evaluation, BEER's included (CASE_SETTINGS says why the launches stop there)
    runtime = info["runtime"]
    assert runtime["bytes_sent_rank0"] * 8 == dist["bits_per_worker"].iloc[-1] > 0
    links = {(link["src"], link["dst"]): link["bytes"] for link in runtime["link_bytes_rank0"]}
    if name.startswith("one-peer"):
        # worker 0 sends to 3 (rounds 0, 2, …) and to 2 (rounds 1, 3, …), one message a link and round (BEER two)
        assert set(links) == {(0, 3), (0, 2)} and sum(links.values()) == runtime["bytes_sent_rank0"]
        return
    assert (dist["bits_per_worker_max"] == dist["bits_per_worker"]).all()
    if links:  # gossip and exchanges: the same bytes on each of worker 0's two links, nothing else
        assert set(links) == {(0, 1), (0, 3)} and links[(0, 1)] == links[(0, 3)]
        assert sum(links.values()) == runtime["bytes_sent_rank0"]
        times = runtime["link_times_rank0"]  # measured per incoming link, beside the model
        assert {(t["src"], t["dst"]) for t in times} == {(1, 0), (3, 0)}
        assert all(t["measured_arrival_s"] > 0 and t["model_arrival_s"] > 0 for t in times)


@pytest.mark.parametrize("name, per_process", [("hybrid-ring", 4), ("hybrid-one-peer", 2), ("hybrid-cifar", 2)])
def test_processes_holding_several_workers_are_the_simulation(launched, tmp_path, name, per_process):
    _, _, info = simulated(launched, name, tmp_path, atol=1e-5 if "cifar" in name else 1e-6)
    assert info["runtime"]["workers_per_process"] == per_process


@pytest.mark.parametrize("name", [f"{name}-{world}" for name, *_, worlds in FAULTS for world in worlds])
def test_under_faults_torch_distributed_processes_are_the_simulation(launched, tmp_path, name):
    """The same messages lost (some) and the same bits, and run.json names the method's rule."""
    sim, dist, info = simulated(launched, name, tmp_path)
    assert list(sim["messages_dropped"]) == list(dist["messages_dropped"]) and sim["messages_dropped"].iloc[-1] > 0
    settings = launched.runs[name][2]
    assert info["faults"]["rule"] == ALGORITHMS.get(settings["algorithm"]).fault_rule
    assert info["faults"].get("active") == settings["faults"].get("active")


@pytest.mark.parametrize("world", [4, 2])
def test_the_one_peer_graphs_methods_step_in_processes_as_in_the_simulator(launched, world):
    """The DistributedCommunicator's plan hears, round by round, the processes holding each worker's peer, and its
    models are the simulator's (float32, as the wire carries them: to the last bits only, the runtimes adding in
    other orders); 2 and 4 workers a process."""
    from bench.comm import SimulatedCommunicator
    from dist_cases import N, ONE_PEER_METHODS, ROUNDS, one_peer_steps

    per = N // world
    parts = [torch.load(launched.worlds[world] / f"rank{r}.pt")["one_peer"] for r in range(world)]
    for name, compressor in ONE_PEER_METHODS:
        sim = one_peer_steps(name, compressor, lambda topology, _: SimulatedCommunicator(topology))
        assert all(p[name]["round"] == ROUNDS for p in parts)
        for rank, part in enumerate(parts):  # round t: worker i hears i + 2^k (k = t mod 3)
            owners = [sorted({(i + 2 ** (t % 3)) % N // per for i in range(rank * per, (rank + 1) * per)} - {rank})
                      for t in range(ROUNDS)]
            assert part[name]["heard"] == owners
        torch.testing.assert_close(torch.cat([p[name]["x"] for p in parts]), sim["x"], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")


def test_a_run_started_from_python_launches_its_ranks_without_a_command_line(tmp_path, monkeypatch):
    """`bench.run.start` with backend dist and no argv: the ranks read its settings from a file (none is left
    behind) and train what one process simulates."""
    import tempfile

    settings = {**CASE_SETTINGS, "algorithm": "choco", "compressor": "sign", "quiet": True}
    assert start(settings, tmp_path / "sim") == 0
    # a temporary folder of this test's own: other tests launching ranks at the same time write to the shared one
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    assert start({**settings, "backend": "dist", "procs": 2}, tmp_path / "dist") == 0
    sim, dist = metrics(tmp_path / "sim").drop(columns=TIMING), metrics(tmp_path / "dist").drop(columns=TIMING)
    pd.testing.assert_frame_equal(sim, dist, rtol=1e-4, atol=1e-6)
    info = json.loads((tmp_path / "dist" / "run.json").read_text())
    assert info["status"] == "completed" and info["runtime"]["processes"] == 2
    assert info["timing"]["compute"] == "measured" and 0 <= info["timing"]["others_cpu_share"] <= 1  # the ranks met
    assert info["config"] == {**json.loads((tmp_path / "sim" / "run.json").read_text())["config"],
                              "backend": "dist", "procs": 2}
    assert list(private.glob("bench-ranks-*")) == []  # the settings file is removed


# ---- one run stopped six ways ----------------------------------------------------------------------------------
def _ranks_of(launcher: subprocess.Popen, count: int, timeout: float = 120) -> dict[int, int]:
    """{rank: pid} of the ranks ``bench run --backend dist`` started: the launcher's children named ``bench-rank-N``
    (bench/run/rank.py names them), read from /proc."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                head, tail = stat.read_text().rsplit(")", 1)
            except OSError:
                continue
            name = head.split("(", 1)[1]
            if int(tail.split()[1]) == launcher.pid and re.fullmatch(r"bench-rank-\d+", name):
                found[int(name.rsplit("-", 1)[1])] = int(stat.parent.name)
        if len(found) == count:
            return found
        time.sleep(0.1)
    pytest.fail(f"the launcher did not start {count} ranks")


def _checkpointed(out: Path, rank: int, after_ns: int | None, timeout: float = 120) -> None:
    """Waits until ``rank`` has written a checkpoint other than the one whose mtime is ``after_ns``: a stop right
    after it finds every rank's last checkpoint at the same step (the next one needs every rank a step further)."""
    checkpoint, deadline = out / f"checkpoint-rank{rank}.pt", time.time() + timeout
    while time.time() < deadline:
        try:
            if checkpoint.stat().st_mtime_ns != after_ns:
                return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    pytest.fail(f"rank {rank} wrote no checkpoint")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has stopped (an orphan's reaper may be slow to collect it)


def test_a_run_stopped_six_ways_is_recorded_each_time_and_the_same_command_resumes_it(tmp_path, launched):
    """One run (CHAIN), each launch resumed from where the last one stopped, right after a checkpoint of its own:
    SIGTERM to the launcher (as Snakemake or Ctrl-C sends it; it forwards it), then to one rank alone, then SIGKILL
    to the launcher; a killed rank 0, a hung rank 0, and a rank killed in ranks launched without bench's launcher
    (as torchrun starts them). The same command under torchrun then finishes the run with the metrics of the run
    never stopped."""
    from bench.run.dist import GRACE_S

    argv = ["run", *as_sets(CHAIN), "--backend", "dist", "--out", str(tmp_path)]

    def launched_after_a_checkpoint(rank: int):
        written = tmp_path / f"checkpoint-rank{rank}.pt"
        after_ns = written.stat().st_mtime_ns if written.exists() else None
        launcher = subprocess.Popen([sys.executable, "-m", "bench", *argv], env=ENV, stderr=subprocess.PIPE, text=True)
        ranks = _ranks_of(launcher, 2)
        _checkpointed(tmp_path, rank, after_ns)
        return launcher, ranks

    def record():
        return json.loads((tmp_path / "run.json").read_text())

    # a signal: every rank stops after the same step, with a checkpoint at that step. One rank alone caught it: it
    # reaches the other's decision through the next read of the losses (bench/run/runner.py). A SIGKILL of the
    # launcher (or its process group) reaches no rank: the kernel sends each SIGTERM when its launcher ends
    # (bench/run/dist.py ``stop_with_parent``), so they stop instead of training on unwatched
    steps = []
    for to in ("launcher", "one rank", "launcher, killed"):
        launcher, ranks = launched_after_a_checkpoint(1)
        # each rank leads a session of its own (scheduled as a group of its own: bench/run/dist.py launch_ranks), so
        # only the launcher's forwarding can bring it a signal sent to the launcher
        assert [os.getsid(pid) for pid in ranks.values()] == list(ranks.values())
        assert os.getsid(launcher.pid) != ranks[0]
        os.kill(ranks[1] if to == "one rank" else launcher.pid, signal.SIGKILL if "killed" in to else signal.SIGTERM)
        err = launcher.communicate(timeout=120)[1]
        deadline = time.time() + 60
        while any(_alive(pid) for pid in ranks.values()) and time.time() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in ranks.values()), to
        info = record()
        assert info["status"] == "interrupted", (to, info["status"], err[-2000:])
        step = info["interrupted_at_step"]
        counters = [torch.load(tmp_path / f"checkpoint-rank{r}.pt", weights_only=True)["counters"]["global_step"]
                    for r in range(2)]
        assert counters == [step] * 2 and 0 < step < info["total_steps"], to
        steps.append(step)
        if len(steps) == 1:  # kept to stand for a rank whose save of a later checkpoint never happened
            shutil.copy(tmp_path / "checkpoint-rank1.pt", tmp_path.parent / f"{tmp_path.name}-stale-rank1.pt")
    assert steps[0] < steps[1] < steps[2]  # each stop is in the run the previous one resumed

    # rank 0 writes run.json; killed, it cannot say the run failed: the launcher does, and exits 1. The kill is
    # what it records first; on a busy machine the peer may not notice within the grace and is named as killed
    # after it (bench.run.dist.launch_ranks), never anything else
    launcher, ranks = launched_after_a_checkpoint(0)
    os.kill(ranks[0], signal.SIGKILL)
    err = launcher.communicate(timeout=60)[1]
    assert launcher.returncode == 1, err[-2000:]
    info = record()
    assert info["status"] == "failed", info
    first, *rest = info["error"].split("; ")
    assert first == "launcher: rank 0 was killed by SIGKILL", info["error"]
    assert rest in ([], [f"rank 1 did not stop within {GRACE_S:g} s and was killed"]), rest
    assert f"bench: error: {tmp_path}: rank 0 was killed by SIGKILL" in err and "Traceback" not in err

    # a hung rank 0 never exits: its peer times out after dist_timeout and stops; the launcher then kills it after
    # a short grace (bench.run.dist.GRACE_S), not after a second dist_timeout; nobody else can write the end
    launcher, ranks = launched_after_a_checkpoint(0)
    os.kill(ranks[0], signal.SIGSTOP)
    stopped_at = time.time()
    err = launcher.communicate(timeout=4 * TIMEOUT_S)[1]
    waited = time.time() - stopped_at
    assert launcher.returncode == 1, err[-2000:]
    assert TIMEOUT_S <= waited + 1 and waited < TIMEOUT_S + GRACE_S + 0.5 * TIMEOUT_S, waited
    info = record()  # the first to fail is the peer whose collective timed out; rank 0 is named as the one killed
    assert info["status"] == "failed" and info["error"].startswith("launcher: rank 1 "), info.get("error")
    assert info["error"].endswith(f"rank 0 did not stop within {GRACE_S:g} s and was killed"), info["error"]

    # ranks started without bench's launcher, rank 1 killed: rank 0 fails the run quickly (no hang) and says so
    after_ns = (tmp_path / "checkpoint-rank1.pt").stat().st_mtime_ns
    ranks = launch(["-m", "bench", *argv], 2, stderr=subprocess.PIPE, text=True)
    _checkpointed(tmp_path, 1, after_ns)
    ranks[1].send_signal(signal.SIGKILL)
    killed_at = time.time()
    for proc in ranks:
        proc.wait(timeout=60)
    assert time.time() - killed_at < TIMEOUT_S + GRACE_S  # the survivor stops within the stated timeout
    assert [p.returncode for p in ranks] == [1, -signal.SIGKILL]
    info = record()
    assert info["status"] == "failed" and info["error"].startswith("rank 0:")
    assert "bench: error: rank 0 stopped at step" in ranks[0].stderr.read()
    before = metrics(tmp_path)

    # a process stopped between two ranks' saves leaves their checkpoints at different steps: refused in one line
    # (exit 2) before any rank trains, run.json as it was; the right checkpoint back, the run goes on below
    good, said = (tmp_path / "checkpoint-rank1.pt").read_bytes(), (tmp_path / "run.json").read_bytes()
    shutil.copy(tmp_path.parent / f"{tmp_path.name}-stale-rank1.pt", tmp_path / "checkpoint-rank1.pt")
    proc = subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"bench: error: {tmp_path}: the ranks' checkpoints are at different steps (a process stopped between two "
        f"ranks' saves); remove {tmp_path}/checkpoint-rank*.pt to start the run again"], proc.stderr[-2000:]
    assert (tmp_path / "run.json").read_bytes() == said
    (tmp_path / "checkpoint-rank1.pt").write_bytes(good)

    # the same command under torchrun (its ranks join torchrun's group) resumes from the last checkpoint and finishes
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "bench", *argv], capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = metrics(tmp_path)
    assert record()["status"] == "completed"
    assert after["epoch"].iloc[-1] == CHAIN["epochs"] and after["step"].is_unique
    assert after["step"].is_monotonic_increasing
    # what was measured before the last failure is measured again, identically, after the resume
    both = before.merge(after, on="step", suffixes=("_before", "_after"))
    assert len(both) == len(before) >= 2
    pd.testing.assert_series_equal(both["test_loss_before"], both["test_loss_after"], check_names=False, rtol=1e-9)
    # the metrics of the run never stopped, to the last bit (sign's last-bit flips part a dist run from the
    # simulator, not from itself)
    pd.testing.assert_frame_equal(after.drop(columns=TIMING), metrics(launched.runs["whole"][0]).drop(columns=TIMING))
