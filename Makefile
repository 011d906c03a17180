# Developer entry points. Every target first runs `setup`, which is idempotent and fast when
# nothing changed (see tools/bootstrap.sh).
VENV   ?= .venv
PYTHON := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: help setup lint pytest test test-fast demo bench clean

# pytest workers (pytest-xdist; whole test files per worker, so module fixtures are built once):
# 2 on the 2-core CI machine. PYTEST_WORKERS=0 runs everything in this process.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

help:
	@echo "make setup   create/extend $(VENV): ROS 2 Jazzy wheels, interfaces, editable install"
	@echo "make test    ruff + the whole pytest suite (ROS tests included), 2 workers"
	@echo "make test-fast  ruff + the tests without nodes, launch or slow pipelines (minutes)"
	@echo "make lint    ruff, the layer contract (lint-imports) and mypy"
	@echo "make demo    Zoe simulation, thesis kinematic experiments, synthetic field run -> replay"
	@echo "make bench   run the benchmarks (bench/run_all.py)"
	@echo "make clean   remove the CMake build dir (keeps $(VENV))"

setup:
	@WMR_VENV="$(abspath $(VENV))" bash tools/bootstrap.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

# pytest exit code 5 means no test was collected: that is a failure here, and says so.
pytest: setup
	@rc=0; $(PYTHON) -m pytest -q $(XDIST) --durations=25 test || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: error: pytest collected no tests" >&2; fi; \
	exit $$rc

test: lint
	@$(MAKE) --no-print-directory pytest

# The development lane: no ROS node processes or launch files, no slow end-to-end pipelines.
test-fast: lint
	$(PYTHON) -m pytest -q $(XDIST) -m "not ros and not slow" test

# The most complete pipeline that exists: vehicles, a rough-terrain simulation written to
# out/, and the thesis' kinematic experiments (Table 2.4 Rocky 7, Table 2.6 Zoe) in quick form.
demo: setup
	@mkdir -p out
	$(VENV)/bin/wmr vehicles
	$(VENV)/bin/wmr check rocky7
	$(VENV)/bin/wmr simulate zoe --terrain wmrde:1 --speed 1 --duration 10 --dt 0.04 \
		--out out/demo_zoe_wmrde1.csv
	$(PYTHON) bench/bench_kinematics.py --quick --json out/demo_kinematics.json
	@# A synthetic Warthog field run on grass (cached: delete out/demo_field_run to redo it),
	@# replayed through odometry + online IPEM calibration: Table 3.3 uncalibrated vs
	@# calibrated, drift, recovered parameters vs truth, and a report with plots.
	@if [ -f out/demo_field_run/metadata.yaml ]; then \
		echo "demo: using the cached synthetic field run out/demo_field_run"; \
	else \
		$(VENV)/bin/wmr synth --out out/demo_field_run --terrain grass --duration 120 \
			--seed 0 --force; \
	fi
	$(VENV)/bin/wmr replay out/demo_field_run --out out/demo_replay
	@echo
	@echo "demo: trajectory in out/demo_zoe_wmrde1.csv, benchmark results in out/demo_kinematics.json"
	@echo "demo: replay report in out/demo_replay/report.html (Markdown: out/demo_replay/report.md)"

bench: setup
	@if [ -f bench/run_all.py ]; then $(PYTHON) bench/run_all.py; \
	else echo "bench/run_all.py does not exist yet"; fi

clean:
	rm -rf build
