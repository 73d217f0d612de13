"""Building a study's DAG imports no torch (issue 25): parsing a study, its compressors and its cells reads
bench/catalog, never the torch implementations. Checked with torch made unimportable, in a child process:
a study built as workflow/rules/common.smk builds it, and (slow) snakemake's own dry run; a bad spec is
still refused there with the line `bench run` gives."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.compressors import make_compressor
from bench.errors import BenchError

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(p.stem for p in (ROOT / "config").glob("*.yaml"))

# run first in the child: any import of torch is recorded (with who asked) and fails
NO_TORCH = r"""
import sys, traceback
class NoTorch:
    asked = []
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            NoTorch.asked.append("".join(traceback.format_stack(limit=12)))
            raise ImportError("torch is not importable in this test")
        return None
sys.meta_path.insert(0, NoTorch())
"""

# what common.smk does at its top level, for each study file at each of its scales
BUILD = NO_TORCH + r"""
import json, yaml
from snakemake.utils import validate
from analysis.figures import FIGURES
from analysis.figures.requirements import Grid, cells_frame, unmet
from bench.errors import BenchError
from bench.pipeline import Study
from bench.plan.table import planned_runtimes
from bench.run.config import RunConfig
out = {}
for path in json.loads(sys.argv[1]):
    config = yaml.safe_load(open(path))
    validate(config, "workflow/schemas/config.schema.yaml")
    for scale in ["cpu"] + [s for s in ("gpu",) if config.get(s)]:
        try:
            S = Study({**config, "scale": scale})
        except BenchError as err:
            out[f"{path}@{scale}"] = f"error: {err}"
            continue
        S.jobs()
        grid = Grid(cells_frame([S.configs[c].to_dict() for c in S.cells]), tune_grid=S.tune_grid,
                    tuned=S.tuned_cells, consensus=S.consensus, metrics=S.metrics)
        out[f"{path}@{scale}"] = unmet(config.get("figures", []), grid)
print(json.dumps({"studies": out, "torch": NoTorch.asked, "loaded": "torch" in sys.modules}))
"""


def build(paths):
    proc = subprocess.run([sys.executable, "-c", BUILD, json.dumps([str(p) for p in paths])], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow  # every study parsed in a child process: `make test` runs it, test-fast does not
def test_every_study_and_its_cells_parse_without_torch():
    result = build([ROOT / "config" / f"{study}.yaml" for study in STUDIES])
    assert not result["torch"] and not result["loaded"], result["torch"][:1]
    assert len(result["studies"]) >= len(STUDIES)
    assert all(unmet == [] for unmet in result["studies"].values()), result["studies"]


BAD_SPECS = ["choco/top:2", "choco/qsgd:0", "choco/qsgd:4,biased=maybe", "choco/sign:3", "choco/zip:3",
             "dpsgd/sign", "dgc/qsgd:4", "powersgd/sign", "choco/rand:0.1,fast=true"]


def expected_line(method):
    """What `bench run` says of the cell's compressor, with torch: make_compressor, then the algorithm's check."""
    from bench.algorithms import ALGORITHMS

    algorithm, _, spec = method.partition("/")
    try:
        ALGORITHMS.get(algorithm).check_compressor(make_compressor(spec, contraction=ALGORITHMS.get(algorithm).contraction))
    except BenchError as err:
        return str(err)
    raise AssertionError(f"{method} was expected to be refused")


def test_a_bad_compressor_spec_is_refused_without_torch_with_the_line_bench_run_gives(tmp_path):
    paths = []
    for k, method in enumerate(BAD_SPECS):
        study = {"study": f"bad{k}", "task": "mnist1d-mlp", "seeds": [0],
                 "blocks": {"b": {"method": [method], "topology": ["ring"], "nodes": [4]}}}
        paths.append(tmp_path / f"bad{k}.yaml")
        paths[-1].write_text(yaml.safe_dump(study))
    result = build(paths)
    assert not result["torch"], result["torch"][:1]
    for path, method in zip(paths, BAD_SPECS):
        said = result["studies"][f"{path}@cpu"]
        assert said.startswith(f"error: study '{path.stem}' at scale=cpu: block 'b', cell ") and "\n" not in said
        assert said.endswith(": " + expected_line(method)), (method, said)


# -- snakemake's own dry run -----------------------------------------------------------------------------------
def fake_torch(tmp_path) -> tuple[dict, Path]:
    """An environment in which `import torch` finds a package that records who imported it and fails."""
    probe = tmp_path / "torch-imported.txt"
    package = tmp_path / "no-torch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import os, traceback\n"
        f"open({str(probe)!r}, 'a').write(''.join(traceback.format_stack()))\n"
        "raise ImportError('torch is not importable in this test')\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(package.parent), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return env, probe


def dry_run(env, cwd, configfile, *extra):
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "-n",
                             "--configfile", str(configfile), *extra, "--directory", str(cwd)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # snakemake in child processes
def test_snakemake_builds_the_dags_of_studies_without_torch(tmp_path):
    env, probe = fake_torch(tmp_path)
    cases = {"config": (), "table1-gpu": ("--config", "scale=gpu"), "test-tune": (), "consensus": ()}
    procs = {}
    for name, extra in cases.items():
        (tmp_path / name).mkdir()
        procs[name] = dry_run(env, tmp_path / name, ROOT / "config" / f"{name.removesuffix('-gpu')}.yaml", *extra)
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0 and "total" in stdout, (name, (stdout + stderr)[-2000:])
    assert not probe.exists(), probe.read_text()[-3000:]


@pytest.mark.slow
def test_snakemake_refuses_a_bad_compressor_spec_without_torch_in_one_line(tmp_path):
    env, probe = fake_torch(tmp_path)
    study = {"study": "bad", "task": "mnist1d-mlp", "seeds": [0],
             "blocks": {"b": {"method": ["choco/top:2"], "topology": ["ring"], "nodes": [4]}}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(study))
    stdout, stderr = dry_run(env, tmp_path, tmp_path / "bad.yaml").communicate(timeout=600)
    errors = [line for line in (stdout + stderr).splitlines() if line.startswith("error:")]
    assert errors == [f"error: study 'bad' at scale=cpu: block 'b', cell choco-top2_ring4: "
                      f"{expected_line('choco/top:2')}"], (stdout + stderr)[-2000:]
    assert not probe.exists(), probe.read_text()[-3000:]
