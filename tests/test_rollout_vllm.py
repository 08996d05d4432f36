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
    # multi-turn episodes sampled by vLLM from token ids: masks and observations in place, log-probs the trainer's
    ep = r["episodes"]
    assert all(x["mask_ok"] and x["obs_ok"] and x["lps_ok"] for x in ep["structure"])
    assert any(x["turns"] > 1 for x in ep["structure"]) and ep["observation_tokens"] > 0
    assert ep["distinct"] > 1  # one prompt's episodes, each request seeded apart
    assert ep["mismatch_max"] < 1e-3


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not _vllm_available(), reason="no .venv-vllm with vLLM (run `make vllm-env`)")
def test_grpo_trains_with_the_vllm_engine(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([str(ROOT / ".venv-vllm/bin/reasoning-rl"), "train", "grpo", "--set", f"output_dir={out}",
                           "--set", "grpo.engine=vllm", "--set", "grpo.steps=2", "--set", "grpo.eval_every=2",
                           "--set", "grpo.checkpoint_every=0", "--set", "eval.size=20",
                           "--set", "sft.steps=100"],
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                             "REASONING_RL_CACHE": str(tmp_path / "cache")},
                          capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[1]["rollout/logprob_mismatch_max"] < 1e-3  # the engine samples from the trained weights


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not _vllm_available(), reason="no .venv-vllm with vLLM (run `make vllm-env`)")
def test_openai_engine_pushes_weights_to_a_vllm_server_and_grpo_trains_against_it(tmp_path):
    """A real `vllm serve` (dev mode) on loopback: the `openai` engine's samples carry the server's log-probs,
    a weight push through a shared folder makes the server agree with the pushed model, and GRPO runs
    against the server with pushes every 2 rounds (staleness 0, 1, 0, ...), then with async rounds
    (max_staleness 1: staleness 0, 1, 1)."""
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.rollout.environments import ENVIRONMENTS
    from reasoning_rl.rollout.greedy import greedy_complete
    from reasoning_rl.models.load import build_tiny
    from reasoning_rl.rollout import SamplingConfig, logprob_mismatch
    from reasoning_rl.rollout.openai import OpenAIEngine
    from reasoning_rl.rollout.vllm_server import local_vllm_server
    from reasoning_rl.trainers.grpo import train_grpo
    from tests.helpers.turns import EveryTurnIsACall

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    with local_vllm_server(str(VPY), str(tmp_path / "model"), "tiny", str(tmp_path / "server.log")) as url:
        engine = OpenAIEngine(url, "tiny", tokenizer=tok, weights_dir=str(tmp_path / "weights"))
        prompts = ["12+34=", "7*8=", "5-9="]
        groups = engine.generate(prompts, 4, SamplingConfig(temperature=1.0, max_tokens=6, seed=0))
        assert logprob_mismatch(model, tok, groups)["rollout/logprob_mismatch_max"] < 1e-4
        greedy = SamplingConfig(temperature=0.0, max_tokens=6)
        before = [g.samples[0].text for g in engine.generate(prompts, 1, greedy)]
        torch.manual_seed(1)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.5 * torch.randn_like(p))
        engine.update_weights(model)
        after = [g.samples[0].text for g in engine.generate(prompts, 1, greedy)]
        assert after != before and after == greedy_complete(model, tok, prompts, 6)
        groups = engine.generate(prompts, 4, SamplingConfig(temperature=1.0, max_tokens=6, seed=0))
        assert logprob_mismatch(model, tok, groups)["rollout/logprob_mismatch_max"] < 1e-3

        def grpo_cfg(name, *extra):  # 3 GRPO rounds against the server
            return config.load(Config, overrides=[
                f"output_dir={tmp_path / name}", "model.sft_warm_start=false", "model.tiny.num_layers=2",
                "grpo.engine=openai", f"grpo.engine_url={url}", "grpo.engine_model=tiny", "grpo.steps=3",
                "grpo.prompts_per_step=4", "grpo.group_size=4", "grpo.filter_mixed=false", "eval.size=10",
                "grpo.checkpoint_every=0", "generation.max_tokens=8", *extra])

        cfg = grpo_cfg("run", "grpo.push_every=2", "grpo.eval_every=1")
        history, _, _ = train_grpo(cfg, log=lambda *_: None)
        assert [h["rollout/staleness"] for h in history] == [0, 1, 0]
        assert ["time/push" in h for h in history] == [False, False, True]  # pushed for round 3, before it ran
        assert history[0]["rollout/logprob_mismatch_max"] < 1e-3  # the first push gave the server our weights
        # rollout correction is on by default for this engine: measured every round, weights within their cap
        assert all(h["rollout/mismatch_kl"] >= 0 and h["rollout/is_weight_max"] <= cfg.grpo.is_max for h in history)
        assert history[0]["rollout/mismatch_kl"] < 1e-4  # fresh weights: the server is the trainer, up to kernels

        # async rounds against the same server: round t+1 is generated while update t runs
        cfg = grpo_cfg("async", "grpo.max_staleness=1", "grpo.eval_every=3")
        history, _, _ = train_grpo(cfg, log=lambda *_: None)
        assert [h["rollout/staleness_max"] for h in history] == [0, 1, 1]
        assert ["time/push" in h for h in history] == [False, False, True]  # version 1, for round 3
        assert all(h["rollout/is_weight_max"] <= cfg.grpo.is_max for h in history)

        # multi-turn episodes against the same server: each segment sampled from the episode's token ids
        ENVIRONMENTS.add("every-turn-vllm", EveryTurnIsACall, "tests")
        try:
            cfg = grpo_cfg("episodes", "grpo.environment=every-turn-vllm", "grpo.max_turns=3", "grpo.max_tool_calls=2",
                           "grpo.max_episode_tokens=40", "grpo.steps=2", "grpo.eval_every=2")
            history, _, _ = train_grpo(cfg, log=lambda *_: None)
        finally:
            ENVIRONMENTS.remove("every-turn-vllm")
        assert all(h["tools/calls_per_sample"] > 0 and h["tools/turns_per_sample"] > 1 for h in history)
        assert all(h["rollout/mismatch_kl"] < 1e-4 for h in history)  # pushed every round: the trainer's weights

