# Two commands work on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check lint bench clean

# Two stamps: the demo needs only toolledger[otlp] (the SDK catches the run's spans; export-otlp),
# which installs in about half the time of the test set; the tests need [all] + the dev group. Either may come first.
$(VENV)/.installed-dev: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]' --group dev
	touch $@

$(VENV)/.installed-demo: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[otlp]'
	touch $@

## Run the main demo on the embedded default (SQLite file in ./demo-out).
demo: $(VENV)/.installed-demo
	$(BIN)/python examples/quickstart.py
	$(BIN)/python examples/demo_agent.py

## Run the whole test suite.
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

## Lint, types and tests in one go.
check: $(VENV)/.installed-dev
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/ruff check src tests examples bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache demo-out
