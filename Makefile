# The README's two commands: `make reproduce` (the default study) and `make test`.
# Both create .venv on first use, at the exact versions of constraints.txt (pyproject.toml has ranges);
# torch is pinned there too, so that pip takes the CPU wheel and never a multi-GB CUDA build. Into an
# environment that has its own CUDA torch, install by hand instead: docs/cluster.md.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
CORES  ?= 2
# make test spreads its tests over this many processes (pytest-xdist; "auto": one per core), a file to a process,
# so that a module-scoped fixture (a launch of ranks, a study end to end) is built once, not once per process
TEST_WORKERS ?= auto

.PHONY: reproduce test test-fast track track-check track-refresh setup clean-results peers perf-peers docs docs-check

$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "error: $(PYTHON) is older than Python 3.11; run make with PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt torch
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,slurm]'
	touch $@

setup: $(VENV)/.installed

# The suite's own modules byte-compiled before the commands that start many Python processes (a study's jobs,
# the tests' runs, ranks and pipelines). Where PYTHONDONTWRITEBYTECODE is set, as in many container images,
# no process writes its .pyc files, and each one compiled what it imported again: 0.1 s of CPU a `bench run`.
# Up to date, this takes a few hundredths of a second.
BYTECODE = $(PY) -m compileall -q bench analysis

# make reproduce [STUDY=noniid] [SNAKEMAKE_ARGS='--config epochs=3']: a study of config/ end to end. A run
# killed part-way is redone (--rerun-incomplete; runs resume from their checkpoints), so after an abrupt
# kill the same command carries on.
# While it runs, a line every STATUS_EVERY seconds says the runs done, running and left and an ETA, in place of
# Snakemake's rule blocks (errors still show; bench/pipeline/status.py); STATUS_EVERY=0 for Snakemake's own output.
STUDY ?=
SNAKEMAKE_ARGS ?=
STATUS_EVERY ?= 5
STUDY_NAME = $(shell sed -n 's/^study: *//p' config/$(if $(STUDY),$(STUDY),config).yaml 2>/dev/null)
reproduce: $(VENV)/.installed
	@test -z "$(STUDY)" || test -f "config/$(STUDY).yaml" || \
	  { echo "error: STUDY=$(STUDY): no config/$(STUDY).yaml; studies: $$(ls config | sed -n 's/\.yaml$$//p' | grep -v '^config$$' | tr '\n' ' ')"; exit 2; }
	@$(BYTECODE)
	BENCH_STATUS=$(STATUS_EVERY) $(VENV)/bin/snakemake --cores $(CORES) --rerun-incomplete $(if $(STUDY),--configfile config/$(STUDY).yaml) $(SNAKEMAKE_ARGS)
	@echo "reproduce: the report is results/$(STUDY_NAME)/report.html (and report.md); figures in results/$(STUDY_NAME)/figures/"

test: $(VENV)/.installed
	@$(BYTECODE)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-fast: $(VENV)/.installed   # the maths and behaviour without the process- and pipeline-heavy tests and the figure drawing
	@$(BYTECODE)
	ENTRY_PROPERTY_SCALE=0.25 $(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile

track: $(VENV)/.installed ; $(PY) -m bench track $(TRACK_ARGS)

# make docs [DOCS_FROM='results/noniid results/smoke']: the tables and figures of README.md and docs/results.md that
# a study measured, written again from its committed tables under results/baselines/docs/ (after copying those of
# the finished studies named); make docs-check writes nothing and fails naming each block that differs
docs: $(VENV)/.installed ; $(PY) -m analysis docs $(if $(DOCS_FROM),--from $(DOCS_FROM))
docs-check: $(VENV)/.installed ; $(PY) -m analysis docs --check

# CI's speed check (docs/tracking.md): the quick set of this commit, then its ratio figures against the
# committed history, with the safeguards `analysis history` applies by default (records of a busy machine
# left out; a timing regression confirmed by a second record). TRACK_TOL rests on the spread of the
# committed quiet-machine records; --expect HEAD refuses a check that measured nothing of this commit (a
# dirty tree, or a machine too busy to time). The first comparison flags on one record (--confirm 1); a
# flag measures the commit again, and the second comparison fails (exit 1) only when both records are
# worse: a cold first record strayed by up to 134 % on a quiet machine; a real slowdown stays slow.
TRACK_TOL ?= 0.6
TRACK_COMPARE = $(PY) -m analysis history results/history --kinds ratio --tol ratio=$(TRACK_TOL) \
	  --clean-only --expect HEAD --no-figures --out results/history-check
# The committed history is kept current: track-check first refuses (exit 1, one line) one whose newest committed
# record is more than TRACK_MAX_BEHIND first-parent commits behind HEAD, since a record compared across that
# many changes reads redefinitions and drift as regressions. track-refresh records HEAD (a clean tree only) into
# results/history, for a commit of it.
TRACK_MAX_BEHIND ?= 25
track-check: $(VENV)/.installed
	@$(PY) -m bench.track.freshness --max-behind $(TRACK_MAX_BEHIND)
	$(PY) -m bench track --settle 120
	$(TRACK_COMPARE) --confirm 1 || { status=$$?; test $$status -eq 1 || exit $$status; \
	  echo "track-check: measuring this commit's perf figures again to confirm the regression"; \
	  $(PY) -m bench track --parts perf --settle 120 && $(TRACK_COMPARE); }
track-refresh: $(VENV)/.installed
	@$(PY) -m bench.track.freshness --clean
	$(PY) -m bench track --settle 120
	@echo "track-refresh: now commit the record: git add results/history && git commit -m 'history: HEAD recorded'"

# everything the studies wrote (results/<study>/, logs/, Snakemake's state); the committed baselines and
# tracking history stay
# The peer libraries of `bench perf`'s group h (docs/performance.md), each in an environment of its own under
# .peers/, never in .venv: decent-bench needs Python >= 3.13 (PYTHON313), decent-dp torch (pinned as ours; numpy,
# which its one broadcast_object_list needs and neither package lists).
# (empty where python3.13 does not run: a pyenv shim of a version not selected says so and fails)
PYTHON313 ?= $(shell python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null)
peers: .peers/decent-bench/bin/python .peers/decent-dp/bin/python
.peers/decent-bench/bin/python:
	@test -n "$(PYTHON313)" || { echo "error: decent-bench needs Python >= 3.13: make peers PYTHON313=/path/to/python3.13"; exit 2; }; \
	  "$(PYTHON313)" -m venv .peers/decent-bench && .peers/decent-bench/bin/pip install -q decent-bench==0.3.0
.peers/decent-dp/bin/python:
	$(PYTHON) -m venv .peers/decent-dp && .peers/decent-dp/bin/pip install -q -c constraints.txt torch numpy && \
	  .peers/decent-dp/bin/pip install -q -c constraints.txt decent-dp==0.2.3
perf-peers: $(VENV)/.installed peers
	$(PY) -m bench perf --only h --peer decent-bench=.peers/decent-bench/bin/python \
	  --peer decent-dp=.peers/decent-dp/bin/python --name peers

clean-results:
	find results -mindepth 1 -maxdepth 1 ! -name baselines ! -name history -exec rm -rf {} +
	rm -rf logs .snakemake
