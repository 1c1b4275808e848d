# Two commands work on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check lint bench clean

$(BIN)/toolledger: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/toolledger

## Run the main demo on the embedded default (SQLite file in ./demo-out).
demo: $(BIN)/toolledger
	$(BIN)/python examples/quickstart.py
	$(BIN)/python examples/demo_agent.py

## Run the whole test suite.
test: $(BIN)/toolledger
	$(BIN)/python -m pytest -q

## Lint, types and tests in one go.
check: $(BIN)/toolledger
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/ruff check src tests examples bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

bench: $(BIN)/toolledger
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache demo-out
