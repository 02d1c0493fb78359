# One command runs the product, one runs the tests. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AGENT := $(if $(wildcard agents/pyproject.toml),-e agents/,)

.PHONY: setup run test lint frontend frontend-test clean

$(STAMP): pyproject.toml $(wildcard agents/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' $(AGENT)
	$(BIN)/python manage.py build_agent_wheels --with-deps
	touch $(STAMP)

setup: $(STAMP)

frontend:
	@if [ -f frontend/package.json ]; then \
	  cd frontend && (test -d node_modules || npm ci --no-audit --no-fund) && npm run build; fi

run: setup frontend
	$(BIN)/python manage.py runstack

lint: setup
	$(BIN)/ruff check .

frontend-test:
	@if [ -f frontend/package.json ]; then \
	  cd frontend && (test -d node_modules || npm ci --no-audit --no-fund) && npm run typecheck && npm test; fi

test: setup lint frontend-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf var/ $(VENV)
