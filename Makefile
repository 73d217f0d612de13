# The README's two commands: `make reproduce` (the default study) and `make test`.
# Both create .venv on first use; torch is installed first, pinned, so that pip takes the
# CPU wheel and never a multi-GB CUDA build.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
CORES  ?= 2

.PHONY: reproduce test test-fast setup clean-results

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

reproduce: $(VENV)/.installed
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake --cores $(CORES)

test: $(VENV)/.installed
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed   # the maths and behaviour without the process- and pipeline-heavy tests
	$(PY) -m pytest -q -m "not slow"

clean-results:
	rm -rf results/consensus .snakemake
