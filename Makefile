# One entry point for people and CI. `make ci` is exactly what .ci/run executes.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export PYO3_PYTHON := $(abspath $(PY))
SCIFACT ?= ../shared/data/scifact

.PHONY: venv install dev test test-rust test-python lint fmt bench ci clean

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip maturin

venv: $(PY)

## Build the release wheel and install it with the test extras (what a user gets).
install: $(PY)
	$(PIP) install -q ".[test]"

## Fast rebuild of the extension into the venv while developing.
dev: $(PY)
	$(PIP) install -q -e ".[test]" --config-settings=build-args="--profile dev-release"

test-rust:
	cargo test --manifest-path rust/Cargo.toml --quiet

test-python: $(PY)
	$(PY) -m pytest -q

test: test-rust test-python

lint: $(PY)
	$(PY) -m ruff check python tests benches
	$(PY) -m ruff format --check python tests benches
	$(PY) -m mypy
	$(PY) -m mypy.stubtest octobrain._core
	cargo fmt --all --check
	cargo clippy --all-targets --features python --quiet -- -D warnings

fmt: $(PY)
	$(PY) -m ruff format python tests benches
	$(PY) -m ruff check --fix python tests benches
	cargo fmt --all

## Side-by-side benchmarks (ours vs bm25s / numpy / pure Python); writes benches/results/.
bench: $(PY)
	OCTOBRAIN_SCIFACT=$(SCIFACT) $(PY) -m pytest benches -q --benchmark-only \
	    --benchmark-json=benches/results/latest.json
	$(PY) benches/report.py benches/results/latest.json

ci: install lint test

clean:
	rm -rf $(VENV) target dist .pytest_cache .ruff_cache .mypy_cache
