# One entry point for people and CI. `make ci` is what .ci/run executes after deleting .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export PYO3_PYTHON := $(abspath $(PY))
SCIFACT ?= ../shared/data/scifact

.PHONY: venv wheel check-dist install dev test test-rust test-python lint fmt bench bench-remember bench-beir bench-scale bench-team ci clean

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q -U pip maturin

venv: $(PY)

## Build the sdist, then from the unpacked sdist alone the one abi3 wheel (release profile) into
## dist/: every wheel CI tests was built from what PyPI would get, with only a Rust toolchain and
## PyPI packages. On Linux, zig (PyPI's ziglang) links against glibc 2.17, so the wheel carries
## the manylinux2014 tag of `[tool.maturin] compatibility` whatever this machine's glibc is.
UNAME := $(shell uname -s)
ifeq ($(UNAME),Linux)
WHEEL_TOOLS := "ziglang>=0.13,<0.14"
WHEEL_FLAGS := --zig
endif
SDIST_BUILD := target/sdist-build

wheel: $(PY)
	rm -rf dist $(SDIST_BUILD)
	$(PIP) install -q "maturin>=1.9,<2" $(WHEEL_TOOLS)
	$(PY) -m maturin sdist -o dist
	mkdir -p $(SDIST_BUILD) && tar xzf dist/octobrain-*.tar.gz -C $(SDIST_BUILD)
	cd $(SDIST_BUILD)/octobrain-* && PATH="$(abspath $(VENV))/bin:$$PATH" \
	    CARGO_TARGET_DIR="$(CURDIR)/target" \
	    "$(abspath $(PY))" -m maturin build --release $(WHEEL_FLAGS) --out "$(CURDIR)/dist"
	@ls dist/octobrain-*-abi3-*.whl

## Tag (manylinux, abi3, auditwheel-confirmed), contents and size of what `make wheel` built.
check-dist: $(PY)
	$(PY) .ci/check_dist.py dist/octobrain-*.tar.gz dist/octobrain-*-abi3-*.whl

## Install that wheel with the test extras: exactly what a user gets, plus the test tools.
install: wheel
	$(PIP) install -q "octobrain[test] @ file://$$(ls $(CURDIR)/dist/octobrain-*-abi3-*.whl)"

## Fast rebuild of the extension into the venv while developing.
dev: $(PY)
	$(PIP) install -q -e ".[test]" --config-settings=build-args="--profile dev-release"

test-rust:
	cargo test --manifest-path rust/Cargo.toml --quiet

## The tests in TEST_WORKERS processes (pytest-xdist; a file's tests stay in one), then the
## resident-service tests alone (marked `service` by tests/conftest.py): their commands wait a
## second for a service to bind, which work beside them can hold up.
TEST_WORKERS ?= 2
test-python: $(PY)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not service"
	$(PY) -m pytest -q -m service

test: test-rust test-python

lint: $(PY)
	$(PY) -m ruff check python tests benches .ci
	$(PY) -m ruff format --check python tests benches .ci
	$(PY) -m mypy
	$(PY) -m mypy.stubtest octobrain._core
	$(VENV)/bin/lint-imports --no-cache
	cargo fmt --all --check
	cargo clippy --all-targets --features python --quiet -- -D warnings

fmt: $(PY)
	$(PY) -m ruff format python tests benches .ci
	$(PY) -m ruff check --fix python tests benches .ci
	cargo fmt --all

## Side-by-side benchmarks (ours vs bm25s / numpy / pure Python); rewrites the README table.
bench: $(PY)
	OCTOBRAIN_SCIFACT=$(SCIFACT) $(PY) -m pytest benches -q --benchmark-only \
	    --benchmark-json=benches/results/latest.json
	$(PY) benches/report.py benches/results/latest.json --update README.md

## `remember` latency at 1k and 10k memories with the bundled model.
bench-remember: $(PY)
	$(PY) benches/remember_latency.py --data $(SCIFACT) --sizes 1000 10000 \
	    --json benches/results/remember_latency.json --update README.md

## BEIR quality/speed ablation through the knowledge path; rewrites the README's BEIR table.
bench-beir: $(PY)
	$(VENV)/bin/octobrain bench beir --data $(SCIFACT) --output benches/results/beir_scifact.json \
	    --update README.md

## Scale benchmark (synthetic memories); rewrites the README's scale table.
bench-scale: $(PY)
	$(VENV)/bin/octobrain bench scale --sizes 1000,10000 --output benches/results/scale.json \
	    --update README.md

## `memorize`/`remember` on a local store vs S3 (moto on loopback); rewrites the README's team table.
bench-team: $(PY)
	$(PY) benches/shared_store.py --data $(SCIFACT) --size 1000 \
	    --json benches/results/shared_store.json --update README.md

ci: install check-dist lint test

clean:
	rm -rf $(VENV) target dist .pytest_cache .ruff_cache .mypy_cache
