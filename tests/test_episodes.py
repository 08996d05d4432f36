"""Multi-turn episodes, token in and token out, on a real transformer: the prompt's ids, each segment as sampled,
each observation tokenized once; the engine's log-probs recomputed by the trainer; the loss blind to observation
tokens; truncation and a failed environment.
"""
from __future__ import annotations

import pytest
import torch

from reasoning_rl.rollout.environments import Step
from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
from tests.helpers.episodes import call, recomputed, record_sampling, sampling as _sampling, tiny  # noqa: F401 - tiny is a fixture
from tests.helpers.turns import EveryTurnIsACall

pytestmark = pytest.mark.timeout(300)


# ------------------------------------------------------------------ token in, token out, on a real transformer



def test_an_episode_is_prompt_plus_sampled_ids_plus_observation_ids_token_for_token(tiny, monkeypatch):
    model, tok = tiny
    sampled = record_sampling(monkeypatch)
    rows = [{"prompt_id": "a", "prompt": "12+7="}, {"prompt_id": "b", "prompt": "3*4="}]
    eps = run_episodes(model, tok, EveryTurnIsACall(), rows, _sampling(), EpisodeLimits(max_turns=3, max_tool_calls=2,
                                                                                        max_episode_tokens=200))
    obs = tok(EveryTurnIsACall.OBS, add_special_tokens=False)["input_ids"]
    for k, e in enumerate(eps):
        # two calls answered; the third segment is a call past max_tool_calls: not run, the episode ends
        want = sampled[0][k] + obs + sampled[1][k] + obs + sampled[2][k]
        assert e.ids == want and e.reason == "max_tool_calls"
        assert e.loss_mask == [1] * len(sampled[0][k]) + [0] * len(obs) + [1] * len(sampled[1][k]) + [0] * len(obs) + \
            [1] * len(sampled[2][k])
        s = e.sample()
        assert s.text == "".join(e.texts) and EveryTurnIsACall.OBS not in s.text  # the verifier reads the model only
        assert len(s.turns) == 3 and s.turns[0].observation == EveryTurnIsACall.OBS


def test_the_trainer_recomputes_the_engines_logprobs_on_model_tokens(tiny):
    """The full sequence scored by the model: at every model token, the log-prob the engine returned."""

    model, tok = tiny
    rows = [{"prompt_id": "a", "prompt": "12+7="}, {"prompt_id": "b", "prompt": "9-5="}]
    eps = run_episodes(model, tok, EveryTurnIsACall(), rows, _sampling(), EpisodeLimits(max_turns=2))
    b = recomputed(model, tok, eps)
    assert b.loss_mask.sum() < b.c_mask.sum()  # observations are in the sequence, out of the loss


def test_a_groups_first_turn_runs_its_prompt_once_and_the_log_probs_still_hold(tiny, monkeypatch):
    """The G episodes of one prompt start from the same ids: the hf engine runs that prefix once (repeats=G) at the
    first turn, and each episode after it on its own ids; the trainer's recomputation still equals every model
    token's log-prob, and the episodes differ."""
    from reasoning_rl.rollout import decode

    calls, real = [], decode.sample_kept
    monkeypatch.setattr(decode, "sample_kept", lambda *a, **k: calls.append((a[1].shape[0], k.get("repeats", 1)))
                        or real(*a, **k))
    model, tok = tiny
    rows = [{"prompt_id": "a", "prompt": "12+7="}] * 3 + [{"prompt_id": "b", "prompt": "9-5="}] * 3
    eps = run_episodes(model, tok, EveryTurnIsACall(), rows, _sampling(), EpisodeLimits(max_turns=2))
    assert calls[0] == (2, 3)  # two prompts through the model, each copied for its three episodes
    assert calls[1][1] == 1  # then every episode on its own ids
    assert len({tuple(e.ids) for e in eps[:3]}) > 1
    recomputed(model, tok, eps)


def test_a_later_turn_runs_only_its_new_tokens_and_samples_what_re_encoding_would(tiny, monkeypatch):
    """With each episode's cache kept from one turn to the next (the default), a turn after the first runs only the
    new tokens through the model (the last sampled token and the observation, the same count for every row), yet the
    episodes are those of re-encoding every turn: the same ids token for token from the same seed, log-probs equal
    up to float noise, and the trainer's recomputation equal to them."""
    import dataclasses

    from reasoning_rl.rollout import decode

    model, tok = tiny
    rows = [{"prompt_id": "a", "prompt": "12+7="}] * 2 + [{"prompt_id": "b", "prompt": "3*45="}] * 2
    limits = EpisodeLimits(max_turns=3, max_tool_calls=2, max_episode_tokens=200)
    fed, real = [], decode.sample_kept

    def counting(m, input_ids, attention_mask, *a, **k):
        fed.append((int(attention_mask.sum()), k.get("past") is not None))  # real input tokens run this call
        return real(m, input_ids, attention_mask, *a, **k)

    monkeypatch.setattr(decode, "sample_kept", counting)
    kept = run_episodes(model, tok, EveryTurnIsACall(), rows, _sampling(), limits)
    reused = fed[:]
    fed.clear()
    again = run_episodes(model, tok, EveryTurnIsACall(), rows, dataclasses.replace(_sampling(), reuse_turn_cache=False),
                         limits)
    obs = len(tok(EveryTurnIsACall.OBS, add_special_tokens=False)["input_ids"])
    assert [p for _, p in reused] == [False, True, True] and [p for _, p in fed] == [False, False, False]
    assert reused[0] == fed[0]  # the first turn: the prompts, once per group either way
    for turn in (1, 2):  # then every episode's last sampled token and the observation, against its whole ids
        assert reused[turn][0] == 4 * (1 + obs) < fed[turn][0]
    for a, b in zip(kept, again):
        assert a.ids == b.ids and a.loss_mask == b.loss_mask
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    recomputed(model, tok, kept)
    assert len({tuple(e.ids) for e in kept[:2]}) > 1


def test_truncation_ends_the_episode_and_is_its_finish_reason(tiny):
    model, tok = tiny
    eps = run_episodes(model, tok, EveryTurnIsACall(), [{"prompt_id": "a", "prompt": "1+1="}], _sampling(8),
                       EpisodeLimits(max_turns=10, max_tool_calls=10, max_episode_tokens=20))
    e = eps[0]
    assert e.truncated and e.reason == "truncated" and e.sample().finish_reason == "length"
    assert len(e.ids) <= 20 and len(e.turns) < 10  # no turn after the budget ran out


def test_the_loss_gradient_on_every_observation_token_is_exactly_zero():
    from reasoning_rl.models.logprobs import pad_rollouts
    from reasoning_rl.algos.losses import ppo_clip

    mask = [1, 1, 0, 0, 0, 1, 1, 0, 1]
    b = pad_rollouts([[5, 6], [7]], [list(range(10, 19)), [3, 4]], [[-1.0] * 9, [-1.0] * 2], 0,
                     loss_masks=[mask, []])
    logp = (b.logp_old + 0.1 * torch.randn(b.logp_old.shape)).requires_grad_()
    out = ppo_clip(logp, b.logp_old, torch.tensor([1.0, -0.5]), b.loss_mask, eps_low=0.2, eps_high=0.2)
    out.loss.backward()
    g = logp.grad[0]
    assert all(g[t] == 0.0 for t, m in enumerate(mask) if m == 0)  # exactly zero, not small
    assert all(g[t] != 0.0 for t, m in enumerate(mask) if m == 1)
    assert b.loss_mask[1].tolist()[:2] == [1, 1]  # a single-turn row: every token trained


def test_a_failed_environment_ends_the_episode_for_masking(tiny):
    class Failing(EveryTurnIsACall):
        def respond(self, states, segments):
            return [Step(failed=True, reason="sandbox failed: died", tool_call=True) for _ in segments]

    model, tok = tiny
    e = run_episodes(model, tok, Failing(), [{"prompt_id": "a", "prompt": "1+1="}], _sampling(), EpisodeLimits())[0]
    assert e.failure == "sandbox failed: died" and e.reason == "environment failed" and len(e.turns) == 1
