# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test demo bench lint clean zookeeper

install: $(STAMP) zookeeper

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# reinstalls (and recompiles the C extensions) when the project or its C sources change
$(STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/seglog/*.c src/seglog/*/*.c src/seglog/*/*.h)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

test: $(STAMP) zookeeper
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# ZooKeeper for the cluster tests and `seglog cluster`: Debian's package (3.8), installed once when
# missing and we are root with apt-get; otherwise the tests that need it skip, saying why
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
zookeeper:
	@if [ -f $(ZOOKEEPER_JAR) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing ZooKeeper (apt-get install zookeeper)"; \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper) >/dev/null \
			|| { echo "apt-get install zookeeper failed: the cluster tests will be skipped (under CI: a failure)"; [ -z "$$CI" ] || exit 1; }; \
	else \
		echo "ZooKeeper is not installed ($(ZOOKEEPER_JAR)) and this is not root with apt-get:" \
			"the cluster tests will be skipped (apt-get install zookeeper)"; \
	fi

demo: $(STAMP)
	$(BIN)/python -m seglog.demo $(DEMO_ARGS)

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build src/*.egg-info src/seglog/*.so src/seglog/*/*.so
