# The two commands: `make demo` (the main job on the embedded default) and `make test`.
# Both set up .venv first (once; again when pyproject.toml or the setup script changes).
VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.installed
# Slow tests run under CI=true (CI has the time) and with `make test-slow`.
PYTEST_MARK := $(if $(CI),,-m "not slow")

.PHONY: setup demo test test-slow bench
setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup_venv.sh
	bash scripts/setup_venv.sh
	touch $@

demo: setup
	$(BIN)/reasoning-rl demo

test: setup
	$(BIN)/python -m pytest -q $(PYTEST_MARK)

test-slow: setup
	$(BIN)/python -m pytest -q -m slow
