# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test demo bench lint clean

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# reinstalls (and recompiles the C codec) when the project or its C sources change
$(STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/seglog/records/*.c src/seglog/records/*.h)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/python -m seglog.demo $(DEMO_ARGS)

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build src/*.egg-info src/seglog/records/*.so
