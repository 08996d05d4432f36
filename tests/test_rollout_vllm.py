"""The `vllm` engine for real, with vLLM's CPU build, in its own environment (.venv-vllm,
built by `make vllm-env`; CI builds it). Slow: vLLM takes about a minute to start."""
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VPY = ROOT / ".venv-vllm" / "bin" / "python"


def _vllm_available() -> bool:
    if not VPY.exists():
        return False
    return subprocess.run([str(VPY), "-c", "import vllm"], capture_output=True, timeout=120).returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not _vllm_available(), reason="no .venv-vllm with vLLM (run `make vllm-env`)")
def test_vllm_engine_groups_logprobs_and_weight_push(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([str(VPY), str(ROOT / "tests/helpers/vllm_engine_check.py"), str(out)], cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "VLLM_TARGET_DEVICE": "cpu"}, capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["group_ids"] == ["a", "b", "c"] and r["group_sizes"] == [4, 4, 4] and r["tasks_kept"]
    for s in r["samples"]:
        assert s["n_ids"] == s["n_lps"] >= 1 and s["text_ok"]
        assert s["finish"] in ("stop", "length")
        assert (s["finish"] == "length") == (s["n_ids"] == 6 and not s["eos_last"]) or s["finish"] == "stop"
    # the engine's sampling log-probs equal a transformers recomputation (float32 on CPU)
    assert r["mismatch_t1"]["rollout/logprob_mismatch_max"] < 1e-4
    assert r["mismatch_t07"]["rollout/logprob_mismatch_max"] < 1e-4
    # pushed weights change the engine's output, and its log-probs then match the pushed model
    assert r["greedy_before"] != r["greedy_after"]
    assert r["mismatch_after_push"]["rollout/logprob_mismatch_max"] < 1e-3


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not _vllm_available(), reason="no .venv-vllm with vLLM (run `make vllm-env`)")
def test_grpo_trains_with_the_vllm_engine(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([str(ROOT / ".venv-vllm/bin/reasoning-rl"), "train", "grpo", "--set", f"output_dir={out}",
                           "--set", "grpo.engine=vllm", "--set", "grpo.steps=2", "--set", "grpo.eval_every=2",
                           "--set", "grpo.checkpoint_every=0", "--set", "grpo.eval_size=20",
                           "--set", "sft.steps=100"],
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                             "REASONING_RL_CACHE": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[1]["rollout/logprob_mismatch_max"] < 1e-3  # the engine samples from the trained weights
