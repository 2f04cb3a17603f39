# Two commands: `make run` and `make test`. Both create .venv with pip when it is missing.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test eval bench install install-test graph clean

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: install
	HOST=$(HOST) PORT=$(PORT) $(PY) -m app serve

test: install-test
	$(PY) -m pytest -q $(PYTEST_ARGS)

$(VENV)/.installed-eval: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[eval]'
	@touch $@

eval: $(VENV)/.installed-eval
	$(PY) -m eval.run $(EVAL_ARGS)

# Latency, overhead, parallelism, load and caches against a fake upstream: writes docs/BENCHMARKS.md and
# docs/bench/*.png (matplotlib comes with the eval extra). BENCH_ARGS="--smoke" for a quick check.
bench: $(VENV)/.installed-eval
	$(PY) -m bench $(BENCH_ARGS)

graph: install
	$(PY) -m app graph

clean:
	rm -rf $(VENV) .pytest_cache
