# Two commands on a fresh machine with python3 >= 3.11: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test bench bench-gpu docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/armillary run examples/demo.toml
	$(BIN)/armillary run examples/demo-rk45.toml
	$(BIN)/armillary report runs/demo-vi.zarr runs/demo-rk45.zarr --out runs/report

# Tests compile their kernels at LLVM -O1 and without the loop vectoriser, into their own cache: a fresh clone
# compiles every kernel (two fifths of the suite's time); -O1 compiles 1.4x faster than -O3, and leaving out the
# vectoriser 1.3x faster again (at -O1 the vectorised lane loops are no faster: measured equal or slower).  The
# bits are -O3's (no fast-math: LLVM keeps every IEEE operation at any level, and a lane's operations are the
# same in scalar and SIMD form), which the legacy-store tests check against stores written at -O3;
# `make run` and `make bench` keep -O3, the vectoriser and their own cache.  Numba's workqueue threading layer
# (the same bits: a kernel's reductions have a fixed order whatever runs its threads) lets an in-process run
# fork its local workers after a system-parallel test launched the layer in the same pytest worker; with
# GNU OpenMP they must be spawned, each importing everything again (~3 s; tests/test_md.py tests that path).
# -n auto: one pytest worker per physical core (pytest-xdist asks psutil), 2 on the CI machine.
TEST_NUMBA := NUMBA_OPT=1 NUMBA_LOOP_VECTORIZE=0 NUMBA_THREADING_LAYER=workqueue NUMBA_CACHE_DIR=$(CURDIR)/.numba-test-cache
test: $(VENV)/.installed-test
	$(TEST_NUMBA) $(BIN)/python -m pytest -n auto --dist loadgroup --durations=40 -m "not site" tests

# The docs site into docs/_build/html (warnings are errors; the gallery's scripts run), then the checks of
# the built pages (figures load, links inside the site resolve, screenshots in headless Chromium).  The
# kernels come from the test cache (the same bits, see above).
docs: $(VENV)/.installed-docs
	$(TEST_NUMBA) MPLBACKEND=Agg $(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/python -m pytest -q -m site tests/test_docs_site.py

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/ensemble.py
	$(BIN)/python benchmarks/report.py
	$(BIN)/python benchmarks/md.py
	$(BIN)/python benchmarks/md.py --method langevin --no-conservation
	$(BIN)/python benchmarks/langevin.py
	$(BIN)/python benchmarks/rigid_body.py
	$(BIN)/python benchmarks/rigid_motion.py
	$(BIN)/python benchmarks/multibody.py
	$(BIN)/python benchmarks/midpoint_energy.py
	$(BIN)/python benchmarks/rolling.py
	$(BIN)/python benchmarks/models.py
	$(BIN)/python benchmarks/chaos.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/sections.py
	$(BIN)/python benchmarks/fire.py

# on a machine with a CUDA GPU (both exit 2 without one): the GPU's agreement with the CPU per case, then its rates;
# each bounded in time (on one GPU node, processes whose first kernel failed to compile did not exit)
bench-gpu: $(VENV)/.installed-test
	timeout 1800 $(BIN)/python benchmarks/gpu_agreement.py
	timeout 1800 $(BIN)/python benchmarks/gpu.py
	timeout 1800 $(BIN)/python benchmarks/md_gpu.py

clean:
	rm -rf $(VENV) .pytest_cache .numba-test-cache runs
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
