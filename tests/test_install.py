"""Installation: ranges in pyproject.toml, exact pins in constraints.txt (what `make setup` installs), a
rule environment with what the rules run and nothing else, the licence and the console scripts."""
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from test_layers import imported

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REQUIREMENTS = [Requirement(r) for r in PROJECT["dependencies"]]
EXTRAS = {extra: [Requirement(r) for r in reqs] for extra, reqs in PROJECT["optional-dependencies"].items()}
DIRECT = {canonicalize_name(r.name): r for r in [*REQUIREMENTS, *(r for reqs in EXTRAS.values() for r in reqs)]}
RULE_ENV = yaml.safe_load((ROOT / "workflow/envs/bench.yaml").read_text())


def pins(lines):
    """name -> exact version of `name==version` lines (comments and blank lines skipped)."""
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;=<>!~]+)", line)
            assert match, f"not an exact pin: {line!r}"
            out[canonicalize_name(match[1])] = match[2]
    return out


CONSTRAINTS = pins((ROOT / "constraints.txt").read_text().splitlines())
RULE_ENV_PIP = next(d["pip"] for d in RULE_ENV["dependencies"] if isinstance(d, dict))
RULE_ENV_PINS = pins(RULE_ENV_PIP)


def test_dependencies_are_ranges_pinned_in_the_constraints_that_make_setup_installs():
    assert set(CONSTRAINTS) == set(DIRECT), "constraints.txt pins exactly the direct dependencies"
    for name, req in DIRECT.items():
        assert req.specifier, f"{name}: no range"
        assert not any(s.operator in ("==", "===") for s in req.specifier), f"{name}: pinned in pyproject.toml"
        assert req.specifier.contains(CONSTRAINTS[name], prereleases=True), f"{name}=={CONSTRAINTS[name]} outside {req}"
    # the CPU wheel on this machine; a looser torch would let pip pull a multi-GB CUDA build, yet a cluster's
    # existing CUDA build satisfies the range
    assert CONSTRAINTS["torch"] == "2.13.0"
    assert all(DIRECT["torch"].specifier.contains(v) for v in ("2.5.1+cu121", "2.6.0+cu124", "2.13.0+cu130"))
    recipe = (ROOT / "Makefile").read_text().split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "constraints.txt" in recipe.splitlines()[0]  # a new pin re-installs
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert installs and all("-c constraints.txt" in line for line in installs)


def test_python_version_agrees_everywhere():
    required = SpecifierSet(PROJECT["requires-python"])
    assert required == SpecifierSet(">=3.11")  # numpy 2.4, pandas 3, scipy 1.17, snakemake 9 and pyarrow 26 need it
    assert required.contains(".".join(map(str, sys.version_info[:3])))
    (python,) = [d for d in RULE_ENV["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert required.contains(python.split("=", 1)[1] + ".0")


def test_the_rule_environment_holds_what_rules_run_and_no_more():
    for name in ("snakemake", "snakemake-executor-plugin-slurm", "pytest", "hypothesis", "choco-bench"):
        assert name not in RULE_ENV_PINS, name
    assert not any(str(d).startswith("-e") for d in RULE_ENV_PIP)
    # the same versions as constraints.txt, for every package of pyproject.toml's own dependencies but snakemake
    assert RULE_ENV_PINS == {name: CONSTRAINTS[name] for name in map(canonicalize_name, (r.name for r in REQUIREMENTS))
                             if name != "snakemake"}


def _imported_distributions():
    """The third-party distributions that bench/ and analysis/ import (what a rule's command loads)."""
    modules = {name.split(".")[0] for package in ("bench", "analysis") for found in imported(ROOT / package).values()
               for name in found}
    modules -= {*sys.stdlib_module_names, "bench", "analysis", "__future__"}
    owners = packages_distributions()
    return {module: {canonicalize_name(d) for d in owners.get(module, [])} for module in modules}


def test_every_imported_package_is_a_dependency_and_in_the_rule_environment():
    for module, dists in _imported_distributions().items():
        assert dists, f"{module}: imported by bench/ or analysis/ but not installed"
        assert dists & set(DIRECT) and dists & set(RULE_ENV_PINS), f"{module} ({', '.join(dists)})"


def test_license():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "the choco-bench authors" in text
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]


def test_console_scripts_are_the_command_lines_mains():
    # the mains that tests/test_docs_commands.py runs for each documented subcommand
    assert PROJECT["scripts"] == {"bench": "bench.cli:main", "choco-analysis": "analysis.cli:main"}
