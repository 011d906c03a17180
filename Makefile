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
	@echo "make demo    show what the package does"
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

demo: setup
	$(VENV)/bin/wmr --help
	@echo
	@echo "wmr_model $$($(PYTHON) -c 'import wmr_model; print(wmr_model.__version__)'):" \
		"the toolchain is ready (ROS 2 interfaces built, wmr installed)."
	@echo "The simulate/predict/replay pipeline lands with the coming issues."

bench: setup
	@if [ -f bench/run_all.py ]; then $(PYTHON) bench/run_all.py; \
	else echo "bench/run_all.py does not exist yet"; fi

clean:
	rm -rf build
