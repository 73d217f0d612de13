"""Snakemake's command line in this process, for the tests that build DAGs (dry runs, lint, profiles): each costs
a second or two instead of an interpreter start-up and a fresh import of Snakemake, bench, torch and pandas.
The tests that run a pipeline for real start `snakemake` itself (tests/shared_studies.py)."""
import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))


def cli(*args: str, check: bool = True) -> tuple[int, str]:
    """`snakemake --snakefile Snakefile ARGS` run from the checkout: its exit status and all it said (stdout,
    stderr and the Snakefile's one-line refusals, which end the interpreter's run with their message)."""
    from snakemake.cli import main

    text, status = io.StringIO(), 0
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text), contextlib.chdir(ROOT):
        try:
            main(["--snakefile", str(ROOT / "Snakefile"), *args])
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
            if isinstance(stop.code, str):
                text.write(stop.code + "\n")
    if check and status != 0:
        raise AssertionError(text.getvalue()[-3000:])
    return status, text.getvalue()


def every_dag(where: Path) -> dict[str, str]:
    """`<study>@<scale>` -> the dry run (`-n -p`: the jobs and their shell lines) of every study of config/ on the
    CPU, and at scale=gpu where the study has a `gpu:` block (without one, scale=gpu runs the CPU settings:
    bench/pipeline/scale.py). A study that does not build is its error (tests/shared_studies.py `once`)."""
    import yaml

    out = {}
    for study in STUDIES:
        config = ROOT / "config" / f"{study}.yaml"
        for scale in ("cpu", "gpu") if "gpu" in yaml.safe_load(config.read_text()) else ("cpu",):
            status, said = cli("-n", "-p", "--configfile", str(config), "--directory", str(where / f"{study}@{scale}"),
                               "--config", f"scale={scale}", check=False)
            built = status == 0 and re.search(r"^total\s+\d+", said, flags=re.M)
            out[f"{study}@{scale}"] = said if built else f"BROKEN {said[-1500:]}"
    return out
