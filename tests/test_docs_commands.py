"""The commands of README.md, config/README.md and docs/ work as written: every `python -m bench|analysis`
subcommand they show exists, every study file and make target they name is there, and every Snakemake
command builds its DAG from this checkout with nothing activated (its dry-run form)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hostile import run_cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_lines() -> list[tuple[str, str]]:
    """(file, command) for every line of a fenced shell block, continuations joined, comments cut."""
    out = []
    for path in DOCS:
        inside, lang, pending = False, "", ""
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("```"):
                inside, lang = (not inside), line.strip().strip("`")
                continue
            if not inside or lang not in ("", "bash", "sh", "console"):
                continue
            pending += line.rstrip("\\").rstrip() + " "
            if line.endswith("\\"):
                continue
            command = re.split(r"\s#\s|\s#$|\s{2,}#", pending)[0].strip()
            pending = ""
            if command:
                out.append((path.relative_to(ROOT).as_posix(), command))
    return out


LINES = documented_lines()


def _module_commands() -> set[tuple[str, str]]:
    found = set()
    for _, line in LINES:
        for m in re.finditer(r"python -m (bench|analysis)(?:\s+([a-z][\w-]*))?", line):
            if m.group(2):
                found.add((m.group(1), m.group(2)))
    return found


def test_the_docs_show_commands_at_all():
    assert len(LINES) > 20 and len(_module_commands()) >= 8  # the parser reads the docs' blocks


@pytest.mark.parametrize("module, command", sorted(_module_commands()))
def test_every_documented_subcommand_exists(module, command, capsys):
    # in this process, the parser `python -m bench|analysis` hands its arguments to (their __main__ calls these)
    from analysis.cli import main as analysis_main
    from bench.cli import main as bench_main

    status, out, err = run_cli({"bench": bench_main, "analysis": analysis_main}[module], [command, "--help"], capsys)
    assert status == 0 and "usage" in out.lower(), (module, command, err[-500:])


def test_every_documented_study_file_and_make_target_exists():
    studies = {s for _, line in LINES for s in re.findall(r"--configfile\s+(\S+)", line)}
    assert studies and all((ROOT / s).is_file() for s in studies), sorted(studies)
    targets = {t for _, line in LINES for t in re.findall(r"^make\s+([\w-]+)", line)}
    makefile = (ROOT / "Makefile").read_text()
    assert {"reproduce", "test"} <= targets
    assert all(re.search(rf"^{re.escape(t)}:", makefile, re.M) for t in targets), sorted(targets)


def _snakemake_commands() -> list[tuple[str, str]]:
    """(first file showing it, command), each command once. --report needs a finished study:
    tests/test_report_browser.py runs it after a real pipeline run."""
    first: dict[str, str] = {}
    for f, line in LINES:
        if re.match(r"(\.venv/bin/)?snakemake\s", line) and "--report" not in line:
            first.setdefault(line, f)
    return sorted((f, line) for line, f in first.items())


@pytest.mark.slow
@pytest.mark.parametrize("where, line", _snakemake_commands())
def test_every_documented_snakemake_command_builds_its_dag_with_nothing_activated(where, line, tmp_path):
    words = shlex.split(line)[1:]
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # nothing activated: no venv on PATH
    dry = [] if "-n" in words else ["-n"]
    proc = subprocess.run([sys.executable, "-m", "snakemake", *words, *dry, "--directory", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (where, line, (proc.stdout + proc.stderr)[-2000:])
    assert "This was a dry-run" in proc.stdout + proc.stderr
