"""The commands of README.md, config/README.md and docs/ work as written: every `python -m bench|analysis`
subcommand they show exists, every study file and make target they name is there, and every Snakemake
command builds its DAG from this checkout with nothing activated (its dry-run form)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
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
    """(module, subcommand) of every `python -m bench|analysis SUBCOMMAND` the docs show."""
    return {(m[1], m[2]) for _, line in LINES for m in re.finditer(r"python -m (bench|analysis)\s+([a-z][\w-]*)", line)}


@pytest.mark.parametrize("module, command", sorted(_module_commands()))
def test_every_documented_subcommand_exists(module, command, capsys):
    # in this process, the parser `python -m bench|analysis` hands its arguments to (their __main__ calls these)
    from analysis.cli import main as analysis_main
    from bench.cli import main as bench_main

    status, out, err = run_cli({"bench": bench_main, "analysis": analysis_main}[module], [command, "--help"], capsys)
    assert status == 0 and "usage" in out.lower(), (module, command, err[-500:])


def test_every_documented_study_file_and_make_target_exists():
    assert len(LINES) > 20 and len(_module_commands()) >= 8  # the parser reads the docs' blocks
    studies = {s for _, line in LINES for s in re.findall(r"--configfile\s+(\S+)", line)}
    assert studies and all((ROOT / s).is_file() for s in studies), sorted(studies)
    targets = {t for _, line in LINES for t in re.findall(r"^make\s+([\w-]+)", line)}
    makefile = (ROOT / "Makefile").read_text()
    assert {"reproduce", "test"} <= targets
    assert all(re.search(rf"^{re.escape(t)}:", makefile, re.M) for t in targets), sorted(targets)


def _snakemake_commands() -> list[list[str]]:
    """Each documented command's arguments in its dry-run form, each once (`-n` added where the docs leave it
    out). --report needs a finished study: tests/test_report_browser.py runs it after a real pipeline run."""
    found = []
    for _, line in LINES:
        if re.match(r"(\.venv/bin/)?snakemake\s", line) and "--report" not in line:
            words = [w for w in shlex.split(line)[1:] if w != "-n"] + ["-n"]
            found += [words] * (words not in found)
    return found


def build_dags(commands: list[list[str]], directory: str) -> None:
    """Snakemake's own command line on each of ``commands`` in this one process (one interpreter start, one
    import of Snakemake and bench for all): a JSON line per command, its exit status and its output's end."""
    from snakemake.cli import main

    here = os.getcwd()
    for words in commands:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                main([*words, "--directory", directory])
            except SystemExit as stop:
                status = stop.code
        os.chdir(here)  # --directory moved into the work folder
        print(json.dumps({"command": words, "status": status, "out": out.getvalue()[-2000:]}))


@pytest.mark.slow  # one child process builds every DAG (a second each)
def test_every_documented_snakemake_command_builds_its_dag_with_nothing_activated(tmp_path):
    commands = _snakemake_commands()
    assert len(commands) >= 5 and ["--cores", "2", "--configfile", "config/noniid.yaml", "-n"] in commands
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # nothing activated: no venv on PATH
    proc = subprocess.run([sys.executable, __file__, json.dumps(commands), str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    built = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [b["command"] for b in built] == commands, proc.stderr[-2000:]
    for b in built:
        assert b["status"] == 0 and "This was a dry-run" in b["out"], (b["command"], b["out"])


# documented `python -m analysis` subcommands that read no study folder, and so are not run on one below
NOT_ON_A_STUDY = {"history", "docs"}  # documented `python -m analysis` commands that read no study
A_STUDY = r"results/(?!baselines/|history|perf/)[\w<>-]+"  # a study's folder as the docs name it
# settings other than the study's, over files the pipeline wrote: each refused in one line naming it
OTHER_SETTINGS = [["summarize", "results/test", "--target-rel", "0.9"], ["claims", "results/test", "--min-seeds", "2"],
                  ["figures", "results/test", "--all"]]


def _study_commands(baselines: Path) -> list[list[str]]:
    """Each documented `python -m analysis ...` line on a study, its arguments pointed at results/test (run from the
    study's root, as the docs run them from the repository's) and its baselines at ``baselines``."""
    lines = [re.sub(A_STUDY, "results/test", line).replace("results/baselines/", f"{baselines}/") for _, line in LINES
             if re.search(rf"python -m analysis\s.*{A_STUDY}", line)]
    return [shlex.split(line.split("python -m analysis", 1)[1]) for line in lines]


@pytest.mark.slow  # a finished pipeline study (shared, copied here), the commands and the pipeline again
def test_the_documented_analysis_commands_leave_a_finished_study_as_the_pipeline_wrote_it(interrupted_study,
                                                                                           tmp_path):
    from shared_studies import snakemake

    where = shutil.copytree(interrupted_study[0], tmp_path / "work", symlinks=True)
    study = where / "results" / "test"
    files = lambda: sorted(p.relative_to(study).as_posix() for p in study.rglob("*") if p.is_file())  # noqa: E731
    written, summary, commands = files(), (study / "summary.csv").read_text(), _study_commands(tmp_path)
    run_here = {c for m, c in _module_commands() if m == "analysis"} - NOT_ON_A_STUDY
    assert {c[0] for c in commands} == run_here, f"documented, not run on a study here: {run_here}"
    for words in commands + OTHER_SETTINGS:
        proc = subprocess.run([sys.executable, "-m", "analysis", *words], cwd=where, capture_output=True, text=True)
        refused = words in OTHER_SETTINGS  # else as documented: exit 0
        assert proc.returncode == 2 * refused and (not refused or proc.stderr.count("\n") == 1 and words[2] in
                                                   proc.stderr), (words, proc.stderr[-2000:])
    snakemake("--cores", "2", "--configfile", str(ROOT / "config/test.yaml"), "--directory", str(where))
    assert files() == written and not list(study.rglob("*.lock"))  # no figure, table or lock nobody asked for
    assert (study / "summary.csv").read_text() == summary  # the study's target and numbers
    assert re.search(r"to target: [\d.]+% \(0.95 x best all-reduce\)", (study / "report.md").read_text())




@pytest.mark.slow  # renders every block of the docs (2 s): make test and make docs-check, not test-fast
def test_the_docs_show_what_analysis_docs_writes_from_the_committed_tables():
    from analysis import docs

    for name in docs.DOCS:  # README.md, then docs/results.md
        text = (ROOT / name).read_text()
        assert docs.rendered(text, None) == (text, []) and docs.unmarked(text, tables=name != "README.md") == []
    for name in ("noniid-table", "methods-costs", "methods-alpha", "spectral-table", "speedup-table",
                 "tuning-table", "scaling-table"):  # one number edited
        table = next(b for b in docs.BLOCK.finditer(text) if b["name"] == name)["text"].split("</sub>")[1]
        edited = text.replace(table, re.sub(r"\d+\.\d+", "12.34", table, count=1))
        assert edited != text and docs.rendered(edited, None)[1] == [name]


@pytest.mark.slow  # draws the docs' figures, twice
def test_the_docs_figures_are_drawn_again_the_same(tmp_path):
    from analysis import docs

    for out in ("a", "b"):
        (tmp_path / out).mkdir()
        docs.rendered((ROOT / "docs/results.md").read_text(), tmp_path / out)
    drawn = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    assert drawn.keys() == {"lag_vs_consensus.png", "noniid_effect.png", "methods.png", "methods_gap_vs_alpha.png",
                            "speedup.png", "spectral_neighbours.png", "sensitivity.png", "scaling_gap_vs_nodes.png"}
    assert drawn == {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}


if __name__ == "__main__":  # the child process of the Snakemake DAG test
    build_dags(json.loads(sys.argv[1]), sys.argv[2])
