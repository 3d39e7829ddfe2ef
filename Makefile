# The two quick-start commands: `make demo` and `make test`. Each sets up a
# virtual environment in .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	touch $@

demo: $(BIN)/.installed
	$(BIN)/gqa demo

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/local_queue.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
