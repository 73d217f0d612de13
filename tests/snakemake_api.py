"""A Snakemake dry run in this process (its API), for tests that build many studies' DAGs: each costs a second
or two instead of an interpreter start-up, a fresh import of Snakemake, bench and pandas. What it prints (the
jobs, with `shell` their shell lines, and the job counts) is returned; a broken study raises."""
import contextlib
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dry_run(configfile: Path, workdir: Path, config: dict | None = None, shell: bool = False) -> str:
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (ConfigSettings, DAGSettings, OutputSettings, ResourceSettings,
                                          StorageSettings)

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        with SnakemakeApi(OutputSettings(printshellcmds=shell)) as api:
            workflow = api.workflow(snakefile=ROOT / "Snakefile", resource_settings=ResourceSettings(cores=1),
                                    config_settings=ConfigSettings(configfiles=[Path(configfile)], config=config or {}),
                                    storage_settings=StorageSettings(), workdir=Path(workdir))
            workflow.dag(dag_settings=DAGSettings()).execute_workflow(executor="dryrun")
    return text.getvalue()
