# Developer entry points. Every target first runs `setup`, which is idempotent and fast when
# nothing changed (see tools/bootstrap.sh).
VENV   ?= .venv
PYTHON := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: help setup lint pytest test demo bench clean

help:
	@echo "make setup   create/extend $(VENV): ROS 2 Jazzy wheels, interfaces, editable install"
	@echo "make test    ruff + the whole pytest suite (ROS tests included)"
	@echo "make lint    ruff only"
	@echo "make demo    simulate Zoe on a benchmark terrain + the thesis kinematic experiments"
	@echo "make bench   run the benchmarks (bench/run_all.py)"
	@echo "make clean   remove the CMake build dir (keeps $(VENV))"

setup:
	@WMR_VENV="$(abspath $(VENV))" bash tools/bootstrap.sh

lint: setup
	$(VENV)/bin/ruff check .

# pytest exit code 5 means no test was collected: that is a failure here, and says so.
pytest: setup
	@rc=0; $(PYTHON) -m pytest -q test || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: error: pytest collected no tests" >&2; fi; \
	exit $$rc

test: lint
	@$(MAKE) --no-print-directory pytest

# The most complete pipeline that exists: vehicles, a rough-terrain simulation written to
# out/, and the thesis' kinematic experiments (Table 2.4 Rocky 7, Table 2.6 Zoe) in quick form.
demo: setup
	@mkdir -p out
	$(VENV)/bin/wmr vehicles
	$(VENV)/bin/wmr check rocky7
	$(VENV)/bin/wmr simulate zoe --terrain wmrde:1 --speed 1 --duration 10 --dt 0.04 \
		--out out/demo_zoe_wmrde1.csv
	$(PYTHON) bench/bench_kinematics.py --quick --json out/demo_kinematics.json
	@echo
	@echo "demo: trajectory in out/demo_zoe_wmrde1.csv, benchmark results in out/demo_kinematics.json"

bench: setup
	@if [ -f bench/run_all.py ]; then $(PYTHON) bench/run_all.py; \
	else echo "bench/run_all.py does not exist yet"; fi

clean:
	rm -rf build
