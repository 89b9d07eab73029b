# The two commands of the README, and helpers. Every target runs tools/setup.sh first,
# which is idempotent: a second run redoes nothing.
SHELL := /bin/bash
VENV := .venv
CORES ?= all
# The memory (MB) Snakemake may hand out to the jobs that declare theirs (the analyses, their
# parts) at once on this machine: by default 90% of its memory, or of the cgroup's limit.
# Expanded when `run` starts, once setup has made the venv.
MEM_MB ?= $(shell $(VENV)/bin/python -c 'from iosweep.analysis.budget import budget_bytes; print(budget_bytes(None) >> 20)')
SNAKEMAKE_ARGS ?=
# make test: pytest-xdist's workers (TEST_WORKERS, default 2: this machine's and CI's cores) for
# all but the `exclusive` tests (tools/test.sh); each test file is one unit of work (its module
# fixtures are made once), the SLURM tests one unit between them, the longest first
# (tests/conftest.py)
TEST_WORKERS ?= 2
PYTEST_ARGS ?= --durations=25

.PHONY: setup setup-tf run test lint unit mutation slurm-cluster slurm-cluster-stop clean

setup:
	bash tools/setup.sh

setup-tf:
	bash tools/setup.sh --with-tensorflow

# Set up both stacks (the default sweep has TensorFlow points, which setup alone would leave
# skipped), then run the default sweep (config/config.yaml) and print the report's path.
# A lock left by a sweep that was killed (its login session ended) is lifted when no other
# Snakemake runs here; --rerun-incomplete redoes the jobs it was in the middle of.
run: setup-tf
	@pgrep -f '[s]nakemake .*--cores' >/dev/null || $(VENV)/bin/snakemake --unlock $(SNAKEMAKE_ARGS) >/dev/null 2>&1 || true
	$(VENV)/bin/snakemake --cores $(CORES) --resources mem_mb=$(MEM_MB) --keep-going --rerun-incomplete $(SNAKEMAKE_ARGS)
	@echo "Report: $$(realpath $$($(VENV)/bin/python -c 'import yaml; print(yaml.safe_load(open("config/config.yaml")).get("results", "results"))'))/report/report.html"

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/snakefmt --check Snakefile workflow/rules
	$(VENV)/bin/snakemake --lint --cores 1
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python tools/check_sizes.py
	$(VENV)/bin/python tools/check_private.py

# Set up (with the TensorFlow stack, so TF points are tested too), lint, then every test
# (unit, real Horovod/MPI jobs, SLURM, browser), each phase timed against the budget
# (tools/test.sh). IOSWEEP_STRICT=1: the environment is the one setup made, so a missing
# fixture, package, stack or browser fails a test instead of skipping it.
test:
	PYTEST_ARGS="$(PYTEST_ARGS)" TEST_WORKERS=$(TEST_WORKERS) bash tools/test.sh

unit: setup
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile -m "not integration and not slurm and not browser" $(PYTEST_ARGS)

# Mutation testing of the analysis, trace and config-validation code (not in CI: slow). A seeded
# sample of SAMPLE mutants per package (default 100; SAMPLE=0: all ~44,000, hours), then the
# killed share per package with its 95% interval. docs/testing.md: how to read it.
SAMPLE ?= 100
SEED ?= 1
mutation:
	bash tools/setup.sh --with-mutation
	$(VENV)/bin/python tools/mutation.py --sample $(SAMPLE) --seed $(SEED)

# A SLURM cluster of 2 emulated nodes on this machine, to try `snakemake --profile slurm`.
slurm-cluster:
	bash tools/slurm-cluster.sh start --nodes 2 --share $(CURDIR)

slurm-cluster-stop:
	bash tools/slurm-cluster.sh stop

clean:
	rm -rf results .snakemake
