# One command runs the product, one runs the tests. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AGENT := $(if $(wildcard agents/pyproject.toml),-e agents/,)

.PHONY: setup run test test-python lint frontend frontend-test clean

$(STAMP): pyproject.toml $(wildcard agents/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' $(AGENT)
	$(BIN)/python manage.py build_agent_wheels --with-deps
	touch $(STAMP)

setup: $(STAMP)

# node_modules is reinstalled when package-lock.json is newer than npm's record of the last install.
NPM_CI := (test node_modules/.package-lock.json -nt package-lock.json || npm ci --no-audit --no-fund)

frontend:
	@if [ -f frontend/package.json ]; then \
	  cd frontend && $(NPM_CI) && npm run build; fi

run: setup frontend
	$(BIN)/python manage.py runstack

lint: setup
	$(BIN)/ruff check .

# check:api regenerates the API contract from the server (so it needs the virtualenv) and fails when the
# committed openapi.json / schema.d.ts differ from it.
frontend-test: setup
	@if [ -f frontend/package.json ]; then \
	  cd frontend && $(NPM_CI) && npm run typecheck && npm run lint && npm run check:api && npm test; fi

test: setup lint frontend-test test-python

# The Python suite in two runs: the in-process tests spread over TEST_WORKERS processes (pytest-xdist; each worker
# gets its own var/ folder, SQLite file and Redis database: config/settings/test.py), then the tests that start
# real processes (tests/integration, tests/e2e) one at a time, since they measure rates, timeouts and kills on a
# machine they share. PYTEST_ARGS go to both runs; a run left with no test to run (exit 5) is not a failure.
TEST_WORKERS ?= 2
REAL_PROCESS_TESTS := tests/integration tests/e2e
test-python: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(addprefix --ignore=,$(REAL_PROCESS_TESTS)) $(PYTEST_ARGS) tests \
	  || [ $$? -eq 5 ]
	$(BIN)/python -m pytest $(PYTEST_ARGS) $(REAL_PROCESS_TESTS) || [ $$? -eq 5 ]

clean:
	rm -rf var/ $(VENV)
