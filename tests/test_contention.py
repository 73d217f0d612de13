"""The meter of what other processes took of the machine while bench track timed (bench/cpu_meter.py):
its arithmetic on given /proc/stat texts, and a real probe with a process spinning beside it."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.cpu_meter import CpuMeter, machine_busy_seconds

STAT = "cpu  {user} 0 {system} 5000 300 0 {softirq} {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n"


def stat(user, system, softirq=0, steal=0) -> str:
    return STAT.format(user=user, system=system, softirq=softirq, steal=steal)


def test_busy_seconds_count_every_busy_field_and_not_idle_or_iowait():
    # user 100 + system 50 + softirq 10 + steal 40 ticks at 100 per second; idle 5000 and iowait 300 left out
    assert machine_busy_seconds(stat(100, 50, 10, 40), 100) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        machine_busy_seconds("cpu0 1 2 3\n", 100)


@pytest.mark.parametrize("busy, own, wall, cores, result", [
    # 4 CPU-seconds busy over 2 s on 2 cores, 1 of them ours (and our children's)
    ((300, 100), (10.0, 11.0), 2.0, 2, {"others_cpu_share": 0.75, "machine_busy_s": 4.0, "own_cpu_s": 1.0,
                                          "wall_s": 2.0, "cores": 2}),
    ((200, 0), (0.0, 2.0), 1.0, 2, {"others_cpu_share": 0.0}),  # all the busy time was ours
    # two 10 ms ticks landed inside a 0.15 ms span: 66 times the machine at face value, never more than all of it
    ((2, 0), (0.0, 0.0), 0.00015, 2, {"others_cpu_share": 1.0}),
    ((100, 0), (0.0, 0.0), 1.0, None, {"others_cpu_share": 1.0, "cores": 1}),  # the cores /proc/stat describes
    (None, (0.0, 0.0), 1.0, 2, {"method": "unavailable"}),  # no /proc/stat: said, never raised
])
def test_others_share_is_machine_busy_less_own_over_wall_times_cores_or_unavailable(busy, own, wall, cores, result):
    texts, owns, clock = iter([stat(0, 0), stat(*busy or (0, 0))]), iter(own), iter([0.0, wall])
    read = (lambda: next(texts)) if busy else (lambda: open("/nonexistent/proc/stat").read())
    with CpuMeter(read, lambda: next(owns), lambda: next(clock), cores=cores, ticks_per_second=100) as m:
        pass
    expected = {"method": "proc-stat", **result}
    assert {k: m.result[k] for k in expected} == pytest.approx(expected) and (busy or len(m.result) == 1)


BURN = ("import sys, time\nwhile time.process_time() < 1.0: pass\n"  # one CPU-second, however busy the machine
        "open(sys.argv[1], 'w').close()\ntime.sleep(60)")


@pytest.mark.slow  # a child process that spins for a second: `make test` runs it, test-fast does not
@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the probe reads Linux's /proc/stat")
def test_a_process_spinning_beside_the_measurement_is_seen(tmp_path):
    # a sibling not waited for while the meter runs: its CPU-second is someone else's
    done = tmp_path / "burnt"
    with CpuMeter() as busy:
        spinner = subprocess.Popen([sys.executable, "-c", BURN, str(done)])
        try:
            deadline = time.monotonic() + 60
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        except BaseException:
            spinner.kill()
            raise
    spinner.kill()
    spinner.wait()
    others = busy.result["others_cpu_share"] * busy.result["wall_s"] * busy.result["cores"]
    assert done.exists() and others >= 0.8, busy.result  # the rest of the machine may add, never remove
    own_burn = BURN.replace("time.sleep(60)", "pass")
    with CpuMeter() as own:  # our own child, waited for inside the span, is ours
        subprocess.run([sys.executable, "-c", own_burn, str(tmp_path / "own")], check=True)
    assert own.result["own_cpu_s"] >= 0.9, own.result


def test_a_runs_share_takes_away_every_ranks_cpu_and_sums_its_spans(monkeypatch):
    """bench/run/busy.py: each span (a checkpoint to the next) adds to the run's counters, and under dist the other
    ranks' CPU, summed by the collective, is the run's own, not others'."""
    from types import SimpleNamespace as Of

    from bench.run.busy import BusyMeter
    from bench.run.evaluation import Counters

    monkeypatch.setattr(CpuMeter, "__exit__", lambda m, *exc: setattr(m, "result", {
        "method": "proc-stat", "machine_busy_s": 4.0, "own_cpu_s": 1.0, "wall_s": 2.0, "cores": 2}))
    comm = Of(n=4, global_mean=lambda part: (part.sum(0) + 1.5) / 4)  # 2 rows of 4 here; another rank's 1.5 CPU-s
    busy = BusyMeter(Of(compute_time="measured"), comm, Counters(), "cpu", dist=True)
    for _ in range(2):
        busy.fold(rows=2)
    assert busy.timing() == {"compute": "measured", "others_cpu_share": 0.375, "cores": 2, "metered_s": 4.0,
                             "method": "proc-stat"}  # (4 - 1 - 1.5) / (2 s x 2 cores), over 2 x 2 s
