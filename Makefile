# The README's two commands: `make reproduce` (the default study) and `make test`.
# Both create .venv on first use, at the exact versions of constraints.txt (pyproject.toml has ranges);
# torch is pinned there too, so that pip takes the CPU wheel and never a multi-GB CUDA build. Into an
# environment that has its own CUDA torch, install by hand instead: docs/cluster.md.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
CORES  ?= 2

.PHONY: reproduce test test-fast track track-check setup clean-results

$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "error: $(PYTHON) is older than Python 3.11; run make with PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt torch
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,slurm]'
	touch $@

setup: $(VENV)/.installed

reproduce: $(VENV)/.installed
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake --cores $(CORES)

test: $(VENV)/.installed
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed   # the maths and behaviour without the process- and pipeline-heavy tests
	ENTRY_PROPERTY_SCALE=0.25 $(PY) -m pytest -q -m "not slow"

track: $(VENV)/.installed ; $(PY) -m bench track $(TRACK_ARGS)

# CI's speed check (docs/tracking.md): the quick set of this commit, then its ratio figures against the
# committed history. TRACK_TOL rests on the spread of the committed quiet-machine records; --expect HEAD
# refuses a check that measured nothing of this commit (a dirty tree, or a machine too busy to time).
# A regression is confirmed by a second measurement of the commit before it fails (exit 1): a cold first
# record strayed by up to 134 % on a quiet machine; a real slowdown stays slow.
TRACK_TOL ?= 0.6
TRACK_COMPARE = $(PY) -m analysis history results/history --kinds ratio --tol ratio=$(TRACK_TOL) --max-load 1.5 \
	  --clean-only --expect HEAD --no-figures --out results/history-check
track-check: $(VENV)/.installed
	$(PY) -m bench track --settle 120
	$(TRACK_COMPARE) || { status=$$?; test $$status -eq 1 || exit $$status; \
	  echo "track-check: measuring this commit's perf figures again to confirm the regression"; \
	  $(PY) -m bench track --parts perf --settle 120 && $(TRACK_COMPARE); }

clean-results:
	rm -rf results/consensus .snakemake
