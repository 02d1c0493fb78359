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

test: setup lint frontend-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The Python suite alone (CI's second pass, on the embedded default: lint and the console checks do not depend on
# the database, so the first pass has run them).
test-python: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf var/ $(VENV)
