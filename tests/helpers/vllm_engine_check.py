"""Exercise the `vllm` engine for real on the tiny model; run in the vLLM environment.

    PYTHONPATH=. .venv-vllm/bin/python tests/helpers/vllm_engine_check.py OUT.json

Builds the tiny model in code, saves it, starts `VLLMEngine` on it, and writes a JSON report:
shapes and finish reasons, the engine's log-probabilities against a `transformers`
recomputation (at T=1 and T=0.7), and whether a weight push changes the engine's output and
keeps the log-probabilities in agreement with the pushed model; then multi-turn episodes whose segments the
engine samples from token ids (`continue_ids`): their ids and masks, and the log-probs on model tokens against
the recomputation. `tests/test_rollout_vllm.py`
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
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny
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
    report["tasks_kept"] = groups[0].row == {"answer": "42"}
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
    report["episodes"] = episodes(engine, model, tok)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)


def episodes(engine, model, tok) -> dict:
    """Four episodes of one prompt, every segment answered by a fixed observation, sampled by `engine` from ids."""
    import torch

    from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
    from reasoning_rl.models.logprobs import pad_rollouts, token_logprobs
    from reasoning_rl.rollout import SamplingConfig
    from tests.helpers.turns import EveryTurnIsACall

    eps = run_episodes(model, tok, EveryTurnIsACall(), [{"prompt_id": "a", "prompt": "12+7="}] * 4,
                       SamplingConfig(temperature=1.0, max_tokens=6, seed=3),
                       EpisodeLimits(max_turns=3, max_tool_calls=2, max_episode_tokens=100), engine=engine)
    obs = tok(EveryTurnIsACall.OBS, add_special_tokens=False)["input_ids"]
    structure = []
    for e in eps:
        seg = [t.tokens for t in e.turns]
        want = [1] * seg[0]
        for n in seg[1:]:
            want += [0] * len(obs) + [1] * n
        structure.append({"mask_ok": e.loss_mask == want, "obs_ok": e.ids[seg[0]:seg[0] + len(obs)] == obs
                          if len(seg) > 1 else True, "turns": len(seg), "reason": e.reason,
                          "lps_ok": len(e.logprobs) == len(e.ids)})
    b = pad_rollouts([e.prompt_ids for e in eps], [e.ids for e in eps], [e.logprobs for e in eps], tok.pad_token_id,
                     loss_masks=[e.loss_mask for e in eps])
    with torch.no_grad():
        lp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask)
    on = b.loss_mask.bool()
    return {"structure": structure, "distinct": len({tuple(e.ids) for e in eps}),
            "observation_tokens": int((b.c_mask.bool() & ~on).sum()),
            "mismatch_max": float((lp[on] - b.logp_old[on]).abs().max())}


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    main(sys.argv[1])
