# Two commands on a fresh machine with python3 >= 3.11: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/armillary run examples/demo.toml
	$(BIN)/armillary run examples/demo-rk45.toml
	$(BIN)/armillary report runs/demo-vi.zarr runs/demo-rk45.zarr --out runs/report

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15 tests

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/ensemble.py
	$(BIN)/python benchmarks/report.py
	$(BIN)/python benchmarks/md.py

clean:
	rm -rf $(VENV) .pytest_cache runs
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
