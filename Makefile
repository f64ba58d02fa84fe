# secinfer: the two commands a new user runs.
#   make demo   builds and runs the main job between two processes
#   make test   sets up .venv, builds, runs cargo test and pytest
# Both install what they need on a fresh machine (Rust via rustup and Python 3.9+ are assumed,
# as on every machine this project runs on).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
BIN := target/release/secinfer

.PHONY: demo test build venv python rust-test py-test bench-ot clean

demo: build
	@echo "== secinfer demo: 10M correlated OTs between two processes over loopback TCP =="
	$(BIN) bench ot --kind cot --count 10000000 --net tcp
	@echo
	@echo "== the same over an in-process WAN link (40 ms RTT, 400 Mbit/s) =="
	$(BIN) bench ot --kind cot --count 10000000 --profile wan

build:
	$(CARGO) build --release -p secinfer-cli

# The virtualenv is rebuilt when a requirements file changes.
REQS := python/requirements-dev.txt $(wildcard python/requirements-test.txt) $(wildcard python/install-extras.sh)
venv: $(VENV)/.installed
$(VENV)/.installed: $(REQS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r python/requirements-dev.txt
	if [ -f python/requirements-test.txt ]; then $(PY) -m pip install -q -r python/requirements-test.txt; fi
	if [ -f python/install-extras.sh ]; then bash python/install-extras.sh $(VENV)/bin/pip $(VENV)/npm --torch; fi
	touch $@

# Builds the Rust core into the virtualenv as secinfer._core.
python: venv
	cd python && VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
	  $(abspath $(VENV))/bin/maturin develop --release -q

rust-test:
	$(CARGO) test --workspace --release

py-test: python
	cd python && ../$(PY) -m pytest -q

test: venv rust-test py-test

clean:
	$(CARGO) clean
	rm -rf $(VENV)
