# The two commands: `make demo` (the main job on the embedded default) and `make test`.
# Both set up .venv first (once; again when pyproject.toml or the setup script changes).
VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.installed
# Slow tests run under CI=true (CI has the time) and with `make test-slow`.
PYTEST_MARK := $(if $(CI),,-m "not slow")
# Tests run on one worker per usable core, at most TEST_WORKERS (pytest-xdist; each worker keeps torch at one thread,
# tests/conftest.py); a worker that runs out of tests takes queued ones from the other. More workers than 2 hold
# more real models in memory at once: raise it where the memory allows (`make test TEST_WORKERS=8`).
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n auto --maxprocesses=$(TEST_WORKERS) --dist worksteal

.PHONY: setup demo test test-slow test-kernels bench vllm-env
setup: $(STAMP)

# vLLM's CPU build in its own environment (its pins clash with ours); CI builds it so the slow
# vLLM engine test runs there. A failed install only means that test is skipped.
VLLM_STAMP := .venv-vllm/.installed
vllm-env: $(VLLM_STAMP)
$(VLLM_STAMP): pyproject.toml scripts/setup_vllm_env.sh
	bash scripts/setup_vllm_env.sh && touch $@ || echo "vllm-env: install failed; the vLLM test will be skipped"

$(STAMP): pyproject.toml scripts/setup_venv.sh
	bash scripts/setup_venv.sh
	touch $@

demo: setup
	$(BIN)/reasoning-rl demo

test: setup $(if $(CI),vllm-env,)
	$(BIN)/python -m pytest -q --durations=25 $(PYTEST_PARALLEL) $(PYTEST_MARK)

test-slow: setup
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m slow

# the tests whose numbers depend on the machine, as other machines run them: each decode kernel forced in turn, two
# threads, either allocator, narrower instruction sets (scripts/test_as_machines.sh; not part of `make test`)
test-kernels: setup
	bash scripts/test_as_machines.sh
