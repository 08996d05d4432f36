"""Episodes in the training loop: GRPO and PPO on multi-turn samples, every turn archived, a failing environment
masked, the Python environment in a run, the documented environment of docs/tools.md, void turns.
"""
from __future__ import annotations

import pytest

from reasoning_rl.rollout.environments import ENVIRONMENTS, Step
from tests.helpers.episodes import call, RUN, tiny, tool  # noqa: F401 - tiny, tool are fixtures
from tests.helpers.turns import EveryTurnIsACall

pytestmark = pytest.mark.timeout(300)


# ------------------------------------------------------------------ in the training loop


def test_grpo_trains_on_multi_turn_episodes_and_archives_every_turn(tmp_path):
    """A real GRPO run whose samples are episodes (every segment answered by an observation): the update runs on
    them, the round reports its tool metrics, and the archive keeps each turn."""
    import json

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    ENVIRONMENTS.add("every-turn-test", EveryTurnIsACall, "tests")
    try:
        cfg = config.load(Config, overrides=RUN + ["grpo.environment=every-turn-test", f"output_dir={tmp_path}"])
        history, _, _ = train_grpo(cfg, log=lambda *_: None)
    finally:
        ENVIRONMENTS.remove("every-turn-test")
    assert len(history) == 2 and all(h["tools/calls_per_sample"] > 0 for h in history)
    assert all(h["tools/turns_per_sample"] > 1 and "loss/policy" in h for h in history)
    assert history[-1]["eval/tool_calls"] > 0  # held-out scored on greedy episodes with the same environment
    lines = [json.loads(x) for x in (tmp_path / "archive.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * 4 * 4 and all(len(ln["turns"]) >= 2 for ln in lines)
    assert all(EveryTurnIsACall.OBS not in ln["text"] for ln in lines)  # what was verified: the model's own text
    assert all(ln["model_tokens"] < ln["n_tokens"] for ln in lines)
    # reverify re-scores the model's words of every episode; the archive gives each episode back whole (its ids and
    # loss mask), which is what a pair of episodes trains on
    from reasoning_rl.data.archive import read_archive
    from reasoning_rl.cli.reverify import reverify

    rep = reverify(str(tmp_path), "math", log=lambda *_: None)
    assert sum(rep.flips.values()) == 0 and rep.summary()["samples"] == len(lines)
    back = [s for g in read_archive(str(tmp_path / "archive.jsonl")) for s in g.samples]
    assert all(len(s.token_ids) == len(s.loss_mask) == ln["n_tokens"] and sum(s.loss_mask) == ln["model_tokens"]
               and len(s.turns) == len(ln["turns"]) for s, ln in zip(back, lines))


def test_ppo_trains_on_multi_turn_episodes_with_gae_on_model_tokens_only(tmp_path):
    """PPO on episodes: the critic reads the whole sequence, but rewards, advantages, returns and both losses live
    on the model's tokens; every observation token has advantage and return exactly 0."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers import ppo

    batches = []
    real = ppo.PPO.make_batch

    def recording(self, learner, groups):
        batch, m = real(self, learner, groups)
        batches.append(batch)
        return batch, m

    ENVIRONMENTS.add("every-turn-test", EveryTurnIsACall, "tests")
    try:
        cfg = config.load(Config, overrides=[
            f"output_dir={tmp_path}", "model.sft_warm_start=false", "model.tiny.num_layers=1", "ppo.steps=2",
            "ppo.prompts_per_step=4", "ppo.group_size=2", "eval.size=4", "ppo.minibatch_size=4",
            "ppo.train_prompts=16", "ppo.verifier_workers=1", "ppo.checkpoint_every=0", "generation.max_tokens=6",
            "ppo.environment=every-turn-test", "ppo.max_turns=3", "ppo.max_tool_calls=2", "ppo.max_episode_tokens=40"])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ppo.PPO, "make_batch", recording)
            history, _, _ = ppo.train_ppo(cfg, log=lambda *_: None)
    finally:
        ENVIRONMENTS.remove("every-turn-test")
    assert len(history) == 2 and all(h["tools/turns_per_sample"] > 1 and "loss/value" in h for h in history)
    for batch in batches:
        b = batch.tokens
        obs = b.c_mask.bool() & ~b.loss_mask.bool()  # (n, T) observation tokens
        assert obs.any()
        assert (batch.A[obs] == 0).all() and (batch.returns[obs] == 0).all()
        on = b.loss_mask.bool()
        assert (batch.returns[on] != 0).any()  # the critic's targets are on the model's tokens


def test_a_failing_environment_masks_its_samples_in_training(tmp_path):
    import json

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    class Failing(EveryTurnIsACall):
        def respond(self, states, segments):
            return [Step(failed=True, reason="sandbox failed: SandboxError: died", tool_call=True) for _ in segments]

    ENVIRONMENTS.add("failing-test", Failing, "tests")
    try:
        cfg = config.load(Config, overrides=RUN + ["grpo.environment=failing-test", "grpo.steps=1",
                                                   f"output_dir={tmp_path}"])
        history, _, _ = train_grpo(cfg, log=lambda *_: None)
    finally:
        ENVIRONMENTS.remove("failing-test")
    assert history[0]["tools/failure_rate"] == 1.0 and history[0]["verify/masked"] == 16
    assert history[0]["train/samples"] == 0  # nothing trained on, and no reward of 0 given
    lines = [json.loads(x) for x in (tmp_path / "archive.jsonl").read_text().splitlines()]
    assert {ln["verdicts"]["math"]["status"] for ln in lines} == {"error"}
    assert all(ln["verdicts"]["math"]["score"] is None and "sandbox failed" in ln["error"] for ln in lines)


def test_the_python_environment_in_a_run_and_its_config_checks(tmp_path):
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.config.knobs import ConfigError
    from reasoning_rl.trainers.grpo import train_grpo

    with pytest.raises(ConfigError, match="grpo.environment: unknown environment 'nope'; valid: .*python"):
        train_grpo(config.load(Config, overrides=["grpo.environment=nope", f"output_dir={tmp_path}"]))
    with pytest.raises(ConfigError, match="runs its episodes on engine hf, vllm or openai; got grpo.engine='worker'"):
        config.load(Config, overrides=["grpo.environment=python", "grpo.engine=worker"])
    cfg = config.load(Config, overrides=RUN + ["grpo.environment=python", "grpo.steps=1", f"output_dir={tmp_path}"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)  # random weights write no ```python block: one turn each
    assert history[0]["tools/turns_per_sample"] == 1.0 and history[0]["tools/failure_rate"] == 0.0


def test_the_documented_environment_works():
    """docs/tools.md's example of a user's own environment, run as written: its state is the row's table."""
    import re

    from .conftest import ROOT

    doc = (ROOT / "docs" / "tools.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "class Lookup" in b)
    exec(compile(code, "docs/tools.md", "exec"), {})
    try:
        env = ENVIRONMENTS.get("lookup")()
        a, b = env.start({"facts": {"tokyo": 14}}), env.start({"facts": {}})
        text = "Tokyo's population: [[tokyo]] million"
        assert env.call_end(text) == text.index("]]") + 2
        found, unknown, done = env.respond([a, b, a], ["so [[tokyo]]", "so [[tokyo]]", "The answer is 14."])
        assert found.observation == " = 14\n" and found.tool_call and not found.program_error
        assert unknown.program_error and "unknown: 'tokyo'" in unknown.observation  # episodes keep their own tables
        assert done.done and done.reason == "answer"
    finally:
        ENVIRONMENTS.remove("lookup")



def test_void_turns_are_counted_and_filtered_from_the_loss_only_when_asked(tiny):
    """(last turn, outcome status, void?) for episodes; a single-turn sample is never void. With void_turns filter a
    void episode leaves the batch, and the others keep the advantages they had with it in the group."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo_batch import is_void, make_batch
    from reasoning_rl.types import Group, Sample, Turn, Verdict

    _, tok = tiny
    cases = [(Turn("so 4"), Verdict.correct(), False),                                        # an answer
             (Turn("```python\nprint(2)\n```", call="print(2)"), Verdict.incorrect(), False),  # a call
             (Turn("hmm"), Verdict.unparseable(), True),                                     # neither: void
             (Turn("so 5"), Verdict.incorrect(), False)]                                     # a wrong answer is not void
    samples = [Sample(t.model, (5, 6), (-1.0, -1.0), turns=(t,), verdicts={"math": v}) for t, v, _ in cases]
    assert [is_void(s, "math") for s in samples] == [c[2] for c in cases]
    assert not is_void(Sample("hmm", (5,), (-1.0,), verdicts={"math": Verdict.unparseable()}), "math")
    reward = __import__("verifiers").Reward.single("math")
    group = Group("p", "2+2=", {}, samples)
    kept = {}
    for mode in ("keep", "filter"):
        rl = config.load(Config, overrides=[f"grpo.void_turns={mode}"]).grpo
        batch, m = make_batch([group], reward, tok, rl)
        assert m["tools/void"] == 0.25
        kept[mode] = batch.A.tolist()
    assert len(kept["keep"]) == 4 and kept["filter"] == [a for i, a in enumerate(kept["keep"]) if i != 2]
