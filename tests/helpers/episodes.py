"""What the episode tests share: a Python tool on the real sandbox, a tiny transformer, a seeded sampling config."""
from __future__ import annotations

import pytest
import torch

from reasoning_rl.rollout.environments import PythonTool


def call(code: str) -> str:
    return f"Let me compute.\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def tool():
    env = PythonTool({"wall_s": 3.0, "cpu_s": 3.0})
    yield env
    env.shutdown()


@pytest.fixture(scope="module")
def tiny():
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    model.generation_config.eos_token_id = None
    return model.eval(), tok


def sampling(max_tokens=6):
    from reasoning_rl.rollout import SamplingConfig

    return SamplingConfig(temperature=1.0, max_tokens=max_tokens, seed=3)


def record_sampling(monkeypatch) -> list:
    """Every turn's sampled ids, per row, as the decoder returned them (decode.sample_kept recorded, not replaced).
    The rollouts that `cpu_decode=auto` times on a model above its size floor (kernel_choice.measure, on random
    prompts, the first time a process meets a shape this machine has not cached) are not turns and are left out."""
    from reasoning_rl.rollout import decode, kernel_choice

    sampled = []
    measuring = []
    real, real_measure = decode.sample_kept, kernel_choice.measure

    def recording(*a, **k):
        out = real(*a, **k)
        if not measuring:
            sampled.append([row[:n] for row, n in zip(out[0].tolist(), out[2].tolist())])
        return out

    def measure(*a, **k):
        measuring.append(True)
        try:
            return real_measure(*a, **k)
        finally:
            measuring.pop()

    monkeypatch.setattr(decode, "sample_kept", recording)
    monkeypatch.setattr(kernel_choice, "measure", measure)
    return sampled


def recomputed(model, tok, eps):
    """The episodes as the trainer batches them, asserting that its recomputed log-prob of every model token is the
    one the engine returned (1e-4); returns the batch."""
    from reasoning_rl.models.logprobs import pad_rollouts, token_logprobs

    b = pad_rollouts([e.prompt_ids for e in eps], [e.ids for e in eps], [e.logprobs for e in eps], tok.pad_token_id,
                     loss_masks=[e.loss_mask for e in eps])
    with torch.no_grad():
        lp = token_logprobs(model, b.p_ids, b.p_mask, b.c_ids, b.c_mask)
    on = b.loss_mask.bool()
    assert torch.allclose(lp[on], b.logp_old[on], atol=1e-4)
    return b


# a short GRPO run of the tiny model on episodes (the training-loop tests and the openai-server test)
RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=2", "grpo.prompts_per_step=4",
       "grpo.group_size=4", "grpo.filter_mixed=false", "eval.size=4", "grpo.train_prompts=16",
       "generation.max_tokens=6", "grpo.verifier_workers=1", "grpo.checkpoint_every=0", "grpo.max_turns=3",
       "grpo.max_tool_calls=2", "grpo.max_episode_tokens=40"]
