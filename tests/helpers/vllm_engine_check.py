"""Exercise the `vllm` engine for real on the tiny model; run in the vLLM environment.

    PYTHONPATH=. .venv-vllm/bin/python tests/helpers/vllm_engine_check.py OUT.json

Builds the tiny model in code, saves it, starts `VLLMEngine` on it, and writes a JSON report:
shapes and finish reasons, the engine's log-probabilities against a `transformers`
recomputation (at T=1 and T=0.7), and whether a weight push changes the engine's output and
keeps the log-probabilities in agreement with the pushed model. `tests/test_rollout_vllm.py`
runs it and asserts on the report. Not a pytest module (vLLM needs its own environment).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def main(out_path: str) -> None:
    import torch

    from reasoning_rl import config
    from reasoning_rl.configs import Config
    from reasoning_rl.models import build_tiny
    from reasoning_rl.rollout import PromptRow, SamplingConfig, logprob_mismatch
    from reasoning_rl.rollout.vllm import VLLMEngine

    torch.manual_seed(0)
    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    model.eval()
    report: dict = {}
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        tok.save_pretrained(d)
        t0 = time.perf_counter()
        engine = VLLMEngine(d, dtype="float32", seed=0, max_model_len=128)
        report["startup_s"] = time.perf_counter() - t0
    prompts = [PromptRow("a", "12+30=", {"answer": "42"}), PromptRow("b", "7*8=", {"answer": "56"}),
               PromptRow("c", "100-1=", {"answer": "99"})]
    groups = engine.generate(prompts, 4, SamplingConfig(temperature=1.0, max_tokens=6, seed=0))
    report["group_ids"] = [g.prompt_id for g in groups]
    report["group_sizes"] = [len(g.samples) for g in groups]
    report["tasks_kept"] = groups[0].task == {"answer": "42"}
    checks = []
    for g in groups:
        for s in g.samples:
            checks.append({"n_ids": len(s.token_ids), "n_lps": len(s.logprobs), "finish": s.finish_reason,
                           "eos_last": bool(s.token_ids) and s.token_ids[-1] == tok.eos_token_id,
                           "text_ok": s.text == tok.decode(list(s.token_ids), skip_special_tokens=True)})
    report["samples"] = checks
    report["mismatch_t1"] = logprob_mismatch(model, tok, groups)
    g07 = engine.generate(prompts, 3, SamplingConfig(temperature=0.7, max_tokens=5, seed=1))
    report["mismatch_t07"] = logprob_mismatch(model, tok, g07, temperature=0.7)
    greedy = SamplingConfig(temperature=0.0, max_tokens=6)
    before = [g.samples[0].text for g in engine.generate(prompts, 1, greedy)]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    engine.update_weights(model)
    after = [g.samples[0].text for g in engine.generate(prompts, 1, greedy)]
    report["greedy_before"], report["greedy_after"] = before, after
    pushed = engine.generate(prompts, 4, SamplingConfig(temperature=1.0, max_tokens=6, seed=2))
    report["mismatch_after_push"] = logprob_mismatch(model, tok, pushed)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    main(sys.argv[1])
