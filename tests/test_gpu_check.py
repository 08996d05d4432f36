"""bench/gpu_check.py in its tiny form (what a machine without a GPU runs): every step of the GPU check runs for
real at a small size and reports where the parameters were and what it measured."""
import json
import subprocess

import pytest

from .conftest import PY, ROOT, run_env


@pytest.mark.slow  # the whole GPU benchmark script, shrunk: a smoke test of a bench, run by CI
@pytest.mark.timeout(600)
def test_the_gpu_check_runs_its_steps_at_a_tiny_size(tmp_path):
    r = subprocess.run([PY, "bench/gpu_check.py", "--tiny", "--out", str(tmp_path)], capture_output=True, text=True,
                       env=run_env(), timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((tmp_path / "gpu_check.json").read_text())
    assert rep["tiny"] and rep["learning"]["parameter_devices"] == ["cpu"]
    assert rep["learning"]["grpo_rounds"] == 3 and 0 <= rep["learning"]["heldout_after"] <= 1
    t = rep["throughput"]
    assert t["generated_tokens"] > 0 and t["tokens_per_s"] > 0 and t["grpo_update_s"] > 0
    assert t["parameters"] > 10_000
    f = rep["fsdp2"]  # one FSDP2 step through the trainer's sharding, one rank (gloo) here
    assert f["ranks"] == 1 and f["step_s"] > 0 and f["tensors"] > 0 and f["loss"] == f["loss"], f
