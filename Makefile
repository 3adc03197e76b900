# Two commands for a fresh machine: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test lint typecheck pytest bench clean sysdeps

# MuJoCo renders headless on the CPU through EGL (Mesa's llvmpipe). Installed from Debian when missing.
SYSDEPS_STAMP := $(VENV)/.sysdeps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(SYSDEPS_STAMP): | $(BIN)/python
	@if ! ldconfig -p | grep -q 'libEGL_mesa.so'; then \
		echo "installing Mesa EGL (headless rendering for MuJoCo)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl-mesa0 libegl1 libgl1-mesa-dri >/dev/null; \
	fi
	touch $@

sysdeps: $(SYSDEPS_STAMP)

$(STAMP_RUN): pyproject.toml | $(BIN)/python $(SYSDEPS_STAMP)
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python $(SYSDEPS_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(BIN)/hylo demo

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP_TEST)
	$(BIN)/mypy

pytest: $(STAMP_TEST)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(STAMP_RUN)
	$(BIN)/python benchmarks/kernel_overhead.py
	$(BIN)/python benchmarks/eval_overhead.py
	$(BIN)/python benchmarks/eval_breakdown.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
