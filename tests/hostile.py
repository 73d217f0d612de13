"""Helpers of the hostile-input tests (test_bad_input, test_links_and_paths, test_yaml_and_names,
test_analysis_damaged_files, test_robust_outputs, test_run_failures, test_security_data): the one-line refusal
every bad input must end in, a command run in this process, the temporary files left in a folder, a study's DAG
built in this process, an alias bomb."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LSQ = ["--task", "lsq", "--nodes", "4", "--epochs", "1", "--seed", "1", "--quiet"]  # a run of a second
CHILD = "child"  # argv[0] of a row run in a child process: one that once hung or ran out of memory


def run_cli(main, argv: list[str], capsys) -> tuple[int, str, str]:
    """(status, stdout, stderr) of the command-line entry point ``main(argv)`` in this process (``bench.cli.main``,
    ``analysis.cli.main``): a refusal of argparse itself and ``--help`` end in SystemExit, whose code is the status;
    any other exception escapes and fails the test."""
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_bench(argv: list[str], capsys, timeout=60) -> tuple[int, str, str]:
    """(status, stdout, stderr) of ``bench ARGV``: in this process, or `python -m bench` in a child under
    ``timeout`` when ``argv[0]`` is CHILD (a hang or a MemoryError fails the test, not the session)."""
    from bench.cli import main

    if argv[0] != CHILD:
        return run_cli(main, argv, capsys)
    try:
        proc = subprocess.run([sys.executable, "-m", "bench", *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"bench {' '.join(argv)[:80]} still running after {timeout} s") from None
    return proc.returncode, proc.stdout, proc.stderr


def assert_refused(status, err, *words, code: int = 2) -> str:
    """Exit ``code`` (2: bad input), one line on stderr, no traceback, and every word of ``words`` in that line
    (returned)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == code and "Traceback" not in err, err
    assert len(lines) == 1, err
    for word in words:
        assert str(word) in lines[0], (word, lines[0])
    return lines[0]


def refused(main, argv: list[str], capsys, *words, code: int = 2) -> str:
    """``main(argv)`` in this process ends in ``code`` with one line holding every word of ``words``."""
    status, _, err = run_cli(main, argv, capsys)
    return assert_refused(status, err, *words, code=code)


def temps(directory) -> list[str]:
    """The names in ``directory`` that look like a temporary file (``.tmp`` in them), sorted."""
    return sorted(p.name for p in Path(directory).iterdir() if ".tmp" in p.name)


def dag(config: dict | str, where: Path, **overrides) -> str:
    """What the pipeline's dry run of the study ``config`` (a mapping, or YAML text) prints, built in this process
    (tests/snakemake_api.py) in ``where``; ``overrides``: `--config KEY=VALUE`. A refused study raises SystemExit."""
    from snakemake_api import dry_run

    path = where / "study.yaml"
    path.write_text(config if isinstance(config, str) else json.dumps(config))  # JSON is YAML
    return dry_run(path, where, overrides)


def dag_refused(config: dict | str, where: Path, *words) -> str:
    """The DAG build of ``config`` stops with one line (workflow/rules/common.smk: ``sys.exit("error: ...")``)
    holding every word of ``words``."""
    try:
        dag(config, where)
    except SystemExit as stop:
        return assert_refused(2, f"{stop.code}", *words)
    raise AssertionError("the DAG was built")


def bomb(levels: int = 9) -> str:
    """A "billion laughs" YAML value: 9 aliases per level, 9^levels strings once expanded."""
    parts, prev = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'], "a0"
    for k in range(1, levels):
        parts.append(f"&a{k} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = f"a{k}"
    return "[" + ", ".join(parts) + "]"


def fifo(path: Path, request) -> Path:
    """A named pipe at ``path``, where a file is expected. A reader that waits on it gets its end of file after
    20 s (the test then fails instead of hanging); nothing happens when no one reads it."""
    os.mkfifo(path)

    def wake():  # without a reader, opening the pipe to write fails at once (ENXIO): nothing to wake
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    timer = threading.Timer(20, wake)
    timer.daemon = True
    timer.start()
    request.addfinalizer(timer.cancel)
    return path
