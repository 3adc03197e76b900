# Two commands for a fresh machine: `make demo` and `make test`. Both create .venv and install what they need.
# Python 3.12 where the machine has it (LeRobot needs it: the `lerobot` extra), else python3.
PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) $(shell command -v python3.12) python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
# The extras `make demo` runs (the demo's Meta-World runs) and those the tests run on.
RUN_EXTRAS := metaworld
TEST_EXTRAS = test,metaworld,pusht,aloha,so101,hil,libero,maniskill,kinetix,rerun$(LEROBOT_EXTRA)
# The lerobot extra installs on Python >= 3.12 only.
LEROBOT_EXTRA = $(shell $(BIN)/python -c 'import sys; print(",lerobot" if sys.version_info >= (3, 12) else "")' 2>/dev/null)

.PHONY: demo test lint typecheck pytest bench clean sysdeps web web-check

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

# The browser tests drive Debian's Chromium through Playwright (Playwright's own browser download is not used).
BROWSER_STAMP := $(VENV)/.browser

$(BROWSER_STAMP): | $(BIN)/python
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing Chromium (browser tests)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi
	touch $@

sysdeps: $(SYSDEPS_STAMP) $(BROWSER_STAMP)

$(STAMP_RUN): pyproject.toml | $(BIN)/python $(SYSDEPS_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[$(RUN_EXTRAS)]'
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python $(SYSDEPS_STAMP) $(BROWSER_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[$(TEST_EXTRAS)]'
	$(BIN)/python -m hylo.envs.maniskill_setup
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(BIN)/hylo demo

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP_TEST)
	$(BIN)/mypy

# Test files run in parallel, one process per CPU (at most 4), each file whole in one process (its module fixtures
# built once); `pytest tests/...` alone runs serially. The 25 slowest tests are listed at the end: the suite's time
# is bounded, and they are where it goes.
pytest: $(STAMP_TEST)
	$(BIN)/python -m pytest -q --numprocesses=auto --maxprocesses=4 --dist=loadfile --durations=25

test: lint typecheck pytest

# The web UI's bundle is committed in src/hylo/server/web (package data: installing hylo needs no Node).
# `make web` rebuilds it from web/ with the locked dependencies; `make web-check` fails when the committed bundle
# is not what the source builds to.
WEB_BUNDLE := src/hylo/server/web

web:
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build

web-check: web
	@if [ -n "$$(git status --porcelain -- $(WEB_BUNDLE))" ]; then \
		git status --short -- $(WEB_BUNDLE); \
		echo "the committed web bundle differs from what web/ builds to: run 'make web' and commit $(WEB_BUNDLE)"; \
		exit 1; \
	fi
	@echo "the committed web bundle is what web/ builds to"

bench: $(STAMP_RUN)
	$(BIN)/python benchmarks/kernel_overhead.py
	$(BIN)/python benchmarks/eval_overhead.py
	$(BIN)/python benchmarks/eval_breakdown.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache web/node_modules
