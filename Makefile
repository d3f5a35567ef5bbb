# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test demo bench lint clean zookeeper clients chromium firefox

install: $(STAMP) zookeeper clients chromium firefox

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# reinstalls (and recompiles the C extensions) when the project or its C sources change
$(STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/seglog/*.c src/seglog/*/*.c src/seglog/*/*.h)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

test: $(STAMP) zookeeper clients chromium firefox
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# ZooKeeper for the cluster tests and `seglog cluster`: Debian's package (3.8), installed once when
# missing and we are root with apt-get; otherwise the tests that need it skip, saying why
# (and iptables, with which tests/cluster/test_faults.py cuts a broker off)
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
zookeeper:
	@if [ -f $(ZOOKEEPER_JAR) ] && command -v iptables >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing ZooKeeper and iptables (apt-get install zookeeper iptables)"; \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper iptables) >/dev/null \
			|| { echo "apt-get install zookeeper failed: the cluster tests will be skipped (under CI: a failure)"; [ -z "$$CI" ] || exit 1; }; \
	else \
		echo "ZooKeeper is not installed ($(ZOOKEEPER_JAR)) and this is not root with apt-get:" \
			"the cluster tests will be skipped (apt-get install zookeeper)"; \
	fi

# The other Kafka clients of tests/clients: kcat, Sarama (Go) and Burrow (LinkedIn's consumer-lag
# monitor, on an old Sarama) as Debian packages them, kafkajs from npm (package-lock.json there). Installed when missing and we are root with apt-get; otherwise
# those tests skip, saying why. Under CI a failed install fails the run (and so do the tests).
CLIENTS_JS := tests/clients/js
SARAMA_DIR := /usr/share/gocode/src/github.com/Shopify/sarama
clients:
	@missing=""; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	command -v Burrow >/dev/null || missing="$$missing burrow"; \
	command -v go >/dev/null || missing="$$missing golang-go"; \
	[ -d $(SARAMA_DIR) ] || missing="$$missing golang-github-shopify-sarama-dev"; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing the client tests' tools (apt-get install$$missing)"; \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing) >/dev/null \
			|| { echo "apt-get install$$missing failed: those client tests will be skipped (under CI: a failure)"; [ -z "$$CI" ] || exit 1; }; \
	else \
		echo "not installed:$$missing, and this is not root with apt-get: those client tests will be skipped"; \
	fi; \
	if ! command -v npm >/dev/null; then :; \
	elif [ ! $(CLIENTS_JS)/node_modules/.package-lock.json -nt $(CLIENTS_JS)/package-lock.json ]; then \
		echo "installing kafkajs (npm ci in $(CLIENTS_JS))"; \
		(cd $(CLIENTS_JS) && npm ci --no-audit --no-fund >/dev/null 2>&1) \
			|| { echo "npm ci in $(CLIENTS_JS) failed: the kafkajs tests will be skipped (under CI: a failure)"; [ -z "$$CI" ] || exit 1; }; \
	fi

# Debian's chromium for the console's browser tests (tests/console/test_pages.py), which Playwright
# (the test extra) drives at /usr/bin/chromium: no browser is downloaded. Installed when missing and
# we are root with apt-get; otherwise those tests skip, saying why. Under CI a failed install fails the run.
CHROMIUM := /usr/bin/chromium
chromium:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium for the console's browser tests (apt-get install chromium chromium-driver)"; \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver) >/dev/null \
			|| { echo "apt-get install chromium failed: the browser tests will be skipped (under CI: a failure)"; [ -z "$$CI" ] || exit 1; }; \
	else \
		echo "chromium is not installed ($(CHROMIUM)) and this is not root with apt-get:" \
			"the console's browser tests will be skipped (apt-get install chromium)"; \
	fi

# Debian's firefox-esr for the console's pages in a second browser (tests/console/test_firefox.py),
# driven over its own Marionette protocol (tests/console/marionette.py): Playwright drives only its
# own Firefox builds, and Debian has no geckodriver. Installed as chromium is.
FIREFOX := /usr/bin/firefox-esr
firefox:
	@if [ -x $(FIREFOX) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing firefox-esr for the console's Firefox tests (apt-get install firefox-esr)"; \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q firefox-esr) >/dev/null \
			|| { echo "apt-get install firefox-esr failed: the Firefox tests will be skipped (under CI: a failure)"; [ -z "$$CI" ] || exit 1; }; \
	else \
		echo "firefox-esr is not installed ($(FIREFOX)) and this is not root with apt-get:" \
			"the console's Firefox tests will be skipped (apt-get install firefox-esr)"; \
	fi

demo: $(STAMP)
	$(BIN)/python -m seglog.demo $(DEMO_ARGS)

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

# mypy checks src and, of the tests, tests/cluster so far (the rest of tests/ and bench/ had 97 errors)
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/mypy tests/cluster

clean:
	rm -rf $(VENV) build src/*.egg-info src/seglog/*.so src/seglog/*/*.so
