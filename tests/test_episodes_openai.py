"""Episodes on another engine: token ids to a real local OpenAI-compatible server and back, and GRPO trained on
them (synchronous and one round ahead).
"""
from __future__ import annotations

import pytest

from reasoning_rl.rollout.environments import ENVIRONMENTS
from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
from tests.helpers.episodes import recomputed, RUN, sampling as _sampling, tiny  # noqa: F401 - tiny is a fixture
from tests.helpers.turns import EveryTurnIsACall

pytestmark = pytest.mark.timeout(300)


# ------------------------------------------------------------------ on another engine: token ids to a real server
def test_episodes_on_an_openai_server_are_token_ids_in_and_token_ids_out(tiny):
    """The openai engine continues each episode from its ids (a real HTTP server on loopback serving the same model,
    as `vllm serve` takes a prompt of token ids): every request's prompt is the episode so far, token for token
    (prompt, the server's segments, the observations' ids); the trainer's recomputation equals the server's
    log-probs on model tokens; each request carries its own seed, so the episodes of one prompt differ."""
    from reasoning_rl.rollout import HFEngine
    from reasoning_rl.rollout.openai import OpenAIEngine
    from tests.helpers.openai_server import Server

    model, tok = tiny
    limits = EpisodeLimits(max_turns=3, max_tool_calls=2, max_episode_tokens=200)
    with Server(HFEngine(model, tok)) as srv:
        engine = OpenAIEngine(srv.url, "tiny", max_concurrency=2)
        eps = run_episodes(model, tok, EveryTurnIsACall(), [{"prompt_id": "a", "prompt": "12+7="}] * 4, _sampling(),
                           limits, engine=engine)
    obs = tok(EveryTurnIsACall.OBS, add_special_tokens=False)["input_ids"]
    sent = sorted(tuple(b["prompt"]) for b in srv.bodies)
    want = []
    for e in eps:  # turn t's request: the prompt, then every earlier segment followed by its observation
        seg = [t.tokens for t in e.turns]
        assert e.loss_mask == [1] * seg[0] + [0] * len(obs) + [1] * seg[1] + [0] * len(obs) + [1] * seg[2]
        assert e.ids[seg[0]:seg[0] + len(obs)] == obs and e.reason == "max_tool_calls"
        cut = [0, seg[0] + len(obs), seg[0] + seg[1] + 2 * len(obs)]
        want += [tuple(e.prompt_ids + e.ids[:c]) for c in cut]
    assert sent == sorted(want)  # 12 requests: 4 episodes x 3 turns, each the exact sequence so far
    assert all(b["stop_token_ids"] and b["n"] == 1 for b in srv.bodies)
    assert len({b["seed"] for b in srv.bodies}) == len(srv.bodies)  # every request its own seed
    assert len({tuple(e.ids) for e in eps}) > 1  # so one prompt's episodes are not copies of each other
    recomputed(model, tok, eps)


@pytest.mark.parametrize("staleness", [0, 1])
def test_grpo_trains_on_episodes_sampled_by_an_openai_server(tmp_path, staleness):
    """A GRPO run whose episodes the openai engine samples from a server on loopback holding its own copy of the
    model: the trainer's weights are pushed to it, and the server's log-probs agree with the weights that sampled.
    With max_staleness 1 the episodes of round t+1 are made while update t runs (the async pipeline)."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny
    from reasoning_rl.rollout import HFEngine
    from reasoning_rl.trainers.grpo import train_grpo
    from tests.helpers.openai_server import Server

    served, tok = build_tiny(config.load(Config, overrides=RUN + ["seed=99"]))  # other weights until a push
    overrides = RUN + ["grpo.environment=every-turn-test", f"output_dir={tmp_path}"]
    ENVIRONMENTS.add("every-turn-test", EveryTurnIsACall, "tests")
    try:
        with Server(HFEngine(served.eval(), tok)) as srv:
            cfg = config.load(Config, overrides=overrides + [
                "grpo.engine=openai", f"grpo.engine_url={srv.url}", "grpo.engine_model=tiny",
                f"grpo.max_staleness={staleness}", "grpo.steps=3"])
            history, _, _ = train_grpo(cfg, log=lambda *_: None)
    finally:
        ENVIRONMENTS.remove("every-turn-test")
    assert all(isinstance(b["prompt"], list) for b in srv.bodies)  # every segment sampled from token ids
    assert all(h["tools/calls_per_sample"] > 0 and h["tools/turns_per_sample"] > 1 for h in history)
    assert all("loss/policy" in h for h in history)
    if staleness == 0:
        assert srv.reloads == 3  # the start's weights, then those of updates 1 and 2 before rounds 2 and 3
        assert [h["rollout/staleness"] for h in history] == [0, 0, 0]
        assert all(h["rollout/mismatch_kl"] < 1e-6 for h in history)  # the server holds the trainer's weights
    else:  # round 2 was made from the first weights while update 1 ran
        assert [h["rollout/staleness_max"] for h in history] == [0, 1, 1]
        assert history[0]["rollout/mismatch_kl"] < 1e-6 and history[1]["rollout/mismatch_kl"] > 0
        assert all(h["rollout/is_weight_max"] <= cfg.grpo.is_max for h in history)
