# The two quick-start commands: `make demo` and `make test`. Each sets up a
# virtual environment in .venv on first use; `make test` also installs the
# pinned CDK command line (package.json) for its `cdk synth` test (skipped
# where node is not installed) and Chromium for `gqa ui`'s browser test, and
# runs the linter and the type checker (both from the `test` extra, configured
# in pyproject.toml) before pytest, which splits the suite between a worker
# process per core (tests/conftest.py).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean chromium

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	touch $@

# npm ci writes node_modules/.package-lock.json: the stamp of an install made from package-lock.json
node_modules/.package-lock.json: package-lock.json
	@if command -v npm >/dev/null; then npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the CDK command line is not installed"; fi

demo: $(BIN)/.installed
	$(BIN)/gqa demo

# `gqa ui`'s browser test drives Debian's Chromium headless: installed here where we may (root with
# apt-get), else that test skips and says why
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -qq --no-install-recommends chromium || \
	    { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }; } \
	  >/dev/null 2>&1 || true; }
	@command -v chromium >/dev/null || echo "chromium not installed: the browser test of gqa ui will skip"

# compileall: the suite starts a few hundred Python processes (the CLI, daemons, job wrappers), and
# where PYTHONDONTWRITEBYTECODE is set each compiled every module it imports again (a quarter of a
# second of a daemon's start); the byte code is written once here instead, in ignored __pycache__/
test: $(BIN)/.installed node_modules/.package-lock.json chromium
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m compileall -q app.py gqa cli daemon lambdas infra tests benchmarks
	$(BIN)/python -m pytest -q -n auto

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/local_queue.py

clean:
	rm -rf $(VENV) node_modules .pytest_cache .hypothesis .mypy_cache .ruff_cache
