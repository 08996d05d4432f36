"""Multi-turn episodes with a tool: the Python tool on the real sandbox, token-in/token-out episodes on a real
transformer, and the loss blind to observation tokens.

Adversarial programs run only inside the sandbox's limits (per call: 2-5 s wall and CPU, 256 MiB, its process
cap), with each test's own timeout as the second net.
"""
from __future__ import annotations

import pytest
import torch

from reasoning_rl.rollout.environments import ENVIRONMENTS, Environment, PythonTool, Step
from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
from tests.helpers.turns import EveryTurnIsACall

pytestmark = pytest.mark.timeout(300)


def call(code: str) -> str:
    return f"Let me compute.\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def tool():
    env = PythonTool({"wall_s": 3.0, "cpu_s": 3.0})
    yield env
    env.shutdown()


# (cells run one after another in one episode, what the last observation shows)
REPL = [
    (["x = 6 * 7", "print(x)"], "42"),  # a name defined in one call exists in the next
    (["x = 6 * 7", "x + 1"], "43"),  # the last expression's value, as a REPL shows it
    (["def f(n):\n    return 1 / n", "f(0)"], "ZeroDivisionError: division by zero"),  # the program's own error
    (["import math", "math.sqrt(2) > 1.41"], "True"),
    (["y = 1", "1/0", "y + 1"], "2"),  # a failed cell does not break the state
]


@pytest.mark.parametrize("cells,shown", REPL)
def test_one_interpreter_per_episode(tool, cells, shown):
    st = tool.start({"prompt_id": "p"})
    for c in cells:
        step = tool.respond([st], [call(c)])[0]
    assert shown in step.observation and step.observation.startswith("```output\n") and step.tool_call


# (a structured call as a chat template writes it, what its observation shows): the call runs, or its fault is a REPL
# error the model can read
STRUCTURED = [
    ('<tool_call>\n{"name": "python", "arguments": {"code": "x = 6 * 7\\nx"}}\n</tool_call>', "42"),
    ('<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"print(3)\\"}"}</tool_call>', "3"),  # string args
    ('<tool_call>{"name": "calc", "arguments": {"code": "1"}}</tool_call>', "no tool named 'calc'"),
    ('<tool_call>{"name": "python", "arguments": {"expr": "1"}}</tool_call>', "takes one argument, code"),
    ("<tool_call>print(1)</tool_call>", "the tool call is not a JSON object"),
]


@pytest.mark.parametrize("call,shown", STRUCTURED)
def test_a_structured_tool_call_is_a_call(tool, call, shown):
    segment = "Let me compute.\n" + call + "\nand then more words"
    assert tool.call_end(segment) == len("Let me compute.\n" + call)  # the segment is cut right after the call
    step = tool.respond([tool.start({"prompt_id": "s"})], [segment])[0]
    assert step.tool_call and not step.failed and shown in step.observation


def test_episodes_never_share_state(tool):
    a, b = tool.start({"prompt_id": "a"}), tool.start({"prompt_id": "b"})
    planted = "import os\nSECRET = 7319\nopen('/tmp/planted', 'w').write('7319')\nos.environ['PLANTED'] = '1'"
    tool.respond([a], [call(planted)])
    probe = ("import os\nprint(globals().get('SECRET'), os.path.exists('/tmp/planted'), os.environ.get('PLANTED'), "
             "os.path.exists('/work/planted'))")
    out = tool.respond([b], [call(probe)])[0].observation
    assert "None False None False" in out


def test_the_reference_answer_is_nowhere_the_program_can_look(tool):
    """The row holds the reference; the environment never passes it to the sandbox: a program searching files,
    environment and its own memory for it finds nothing."""
    row = {"prompt_id": "q", "prompt": "What is 3 + 4?", "reference": "ANSWER-73191"}
    st = tool.start(row)
    snoop = ("import os, gc\nhits = []\n"
             "for root in ('/work', '/tmp', '/etc', '/dev/shm'):\n"
             "    for d, _, fs in os.walk(root):\n"
             "        for f in fs:\n"
             "            try:\n"
             "                hits += [os.path.join(d, f)] if 'ANSWER-73191' in open(os.path.join(d, f), errors='ignore').read() else []\n"
             "            except OSError:\n"
             "                pass\n"
             "hits += [k for k, v in os.environ.items() if 'ANSWER-73191' in v]\n"
             "hits += ['memory' for o in gc.get_objects() if isinstance(o, str) and 'ANSWER-7319' + '1' in o]\n"
             "print('found:', hits)")
    out = tool.respond([st], [call(snoop)])[0].observation
    assert "found: []" in out


# (a program that breaks its interpreter or its limits, what the model is shown)
BREAKERS = [
    ("while True:\n    pass", "TimeoutError"),  # CPU spinner: the call's own time limit
    ("import time\ntime.sleep(60)", "TimeoutError"),  # wall clock
    ("x = bytearray(2 * 1024 ** 3)", "MemoryError"),  # memory bomb, caught by the interpreter or the cgroup
    ("import os\nos._exit(3)", "the interpreter died (exit 3"),
    ("print('y' * 5000)", "[output truncated at 1000 characters]"),
    ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        break\nprint('done')", ""),  # fork bomb
]


@pytest.mark.parametrize("code,shown", BREAKERS)
def test_a_program_that_breaks_its_limits_gets_a_repl_error_and_the_next_call_works(tool, code, shown):
    st = tool.start({"prompt_id": "b"})
    tool.respond([st], [call("z = 5")])
    step = tool.respond([st], [call(code)])[0]
    assert not step.failed and shown in step.observation, step
    assert "5" in tool.respond([st], [call("z")])[0].observation  # the episode goes on with its state


def test_a_sandbox_that_fails_masks_the_samples_never_a_zero(tool, monkeypatch):
    from sandboxes import SandboxError

    class Broken:
        def run_many(self, programs, limits):
            raise SandboxError("could not start the sandbox")

    env = PythonTool()
    monkeypatch.setattr(env, "_sandboxes", lambda: Broken())
    a, b = env.start({"prompt_id": "a"}), env.start({"prompt_id": "b"})
    steps = env.respond([a, b], [call("1 + 1"), "The answer is 2."])
    assert steps[0].failed and "could not start the sandbox" in steps[0].reason and steps[0].observation == ""
    assert not steps[1].failed and steps[1].done and steps[1].reason == "answer"


def test_the_registry_and_a_users_environment():
    assert "python" in ENVIRONMENTS.names() and ENVIRONMENTS.get("python") is PythonTool

    class Echo(Environment):
        name = "echo"

        def call_end(self, text):
            i = text.find("CALL")
            return None if i < 0 else i + 4

        def respond(self, states, segments):
            return [Step(observation=" OK ", tool_call=True) for _ in segments]

    ENVIRONMENTS.add("echo-test", Echo, "tests")
    try:
        assert ENVIRONMENTS.get("echo-test")().call_end("a CALL b") == 6
    finally:
        ENVIRONMENTS.remove("echo-test")


# ------------------------------------------------------------------ token in, token out, on a real transformer
@pytest.fixture(scope="module")
def tiny():
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import build_tiny

    model, tok = build_tiny(config.load(Config, overrides=["model.tiny.num_layers=2"]))
    model.generation_config.eos_token_id = None
    return model.eval(), tok


def _sampling(max_tokens=6):
    from reasoning_rl.rollout import SamplingConfig

    return SamplingConfig(temperature=1.0, max_tokens=max_tokens, seed=3)


def _record_sampling(monkeypatch) -> list:
    """Every turn's sampled ids, per row, as the decoder returned them (decode.sample_kept recorded, not replaced)."""
    from reasoning_rl.rollout import decode

    sampled = []
    real = decode.sample_kept

    def recording(*a, **k):
        out = real(*a, **k)
        sampled.append([row[:n] for row, n in zip(out[0].tolist(), out[2].tolist())])
        return out

    monkeypatch.setattr(decode, "sample_kept", recording)
    return sampled


def _recomputed(model, tok, eps):
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


def test_an_episode_is_prompt_plus_sampled_ids_plus_observation_ids_token_for_token(tiny, monkeypatch):
    model, tok = tiny
    sampled = _record_sampling(monkeypatch)
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
    b = _recomputed(model, tok, eps)
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
    _recomputed(model, tok, eps)


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
    _recomputed(model, tok, kept)
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
    _recomputed(model, tok, eps)


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


# ------------------------------------------------------------------ in the training loop
RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=2", "grpo.prompts_per_step=4",
       "grpo.group_size=4", "grpo.filter_mixed=false", "eval.size=4", "grpo.train_prompts=16",
       "generation.max_tokens=6", "grpo.verifier_workers=1", "grpo.checkpoint_every=0", "grpo.max_turns=3",
       "grpo.max_tool_calls=2", "grpo.max_episode_tokens=40"]


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


def test_the_calculator_answers_integer_arithmetic_and_refuses_the_rest():
    env = ENVIRONMENTS.get("calculator")()
    ok, power, zero, prose, none = env.respond([None] * 5, ["37*48=<<37*48>>", "<<9**9**9>>", "<<1//0>>",
                                                           "<<open('/etc/passwd')>>", "1776"])
    assert ok.observation == "=1776\n" and not ok.program_error
    assert power.program_error and zero.program_error and prose.program_error  # shown to the model, not run
    assert none.done and none.reason == "answer"
    assert env.call_end("37*48=<<37*48>>=1776") == len("37*48=<<37*48>>")


def test_tool_traces_are_what_the_calculator_answers():
    """The warm start's traces (sft.tool_fraction) read as an episode would: the call, the calculator's own answer,
    then the answer; and the knob at 0 leaves the SFT cache key of older checkpoints unchanged."""
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.sft import sft_cache_dir
    from reasoning_rl.task.embedded.arithmetic import tool_solution

    trace = tool_solution({"prompt": "37*48=", "answer": "1776"})
    call = trace[: ENVIRONMENTS.get("calculator")().call_end(trace)]
    assert trace == call + ENVIRONMENTS.get("calculator")().respond([None], [call])[0].observation + "1776"
    assert tool_solution({"prompt": "def f():", "answer": "", "tests": []}) is None
    base = config.load(Config)
    assert sft_cache_dir(base) == sft_cache_dir(config.load(Config, overrides=["sft.tool_fraction=0.0"]))
    assert sft_cache_dir(base) != sft_cache_dir(config.load(Config, overrides=["sft.tool_fraction=0.5"]))


# A ChatML template in the style of Qwen's, written here: a tool message is a user turn wrapped in <tool_response>
QWENISH = ("{% for m in messages %}{% if m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}"
           "\n</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
           "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# ... and one that keeps only the last assistant turn's words (as templates that drop earlier reasoning do)
FORGETFUL = ("{% for m in messages %}{% if m['role'] == 'assistant' and not loop.last %}<|im_start|>assistant\n"
             "<|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def smollm2():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasoning_rl.models.sources import resolve

    path = resolve("smollm2-135m-instruct", log=lambda *_: None)
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def test_the_prompt_shows_the_environments_tools_in_the_chat_format(tiny):
    """With tool_format chat and an environment that declares TOOLS, the task renders every prompt with the schemas
    (apply_chat_template's tools=), keeps them on the row for the episodes' template check, and the archive leaves
    them out; in the text format, or without tools, prompts are as before."""
    import copy

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.rollout.environments import prompt_tools
    from reasoning_rl.task.task import Task

    _, tok = tiny
    tok = copy.deepcopy(tok)
    tok.chat_template = ("{% if tools %}[tools: {{ tools | map(attribute='function') | map(attribute='name') "
                         "| join(',') }}]{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    for fmt, shown in (("chat", True), ("text", False)):
        cfg = config.load(Config, overrides=["grpo.environment=python", f"grpo.tool_format={fmt}"])
        task = Task.from_config(cfg.tasks)
        task.render(tok, tools=prompt_tools(cfg.grpo))
        row = task.rows("train")[0]
        assert row["prompt"].startswith("[tools: python]") is shown and ("tools" in row) is shown
    assert prompt_tools(config.load(Config).grpo) is None


# a Hermes/Qwen-style template that renders an assistant turn's structured tool calls as <tool_call> JSON
TOOLISH = ("{% for m in messages %}{% if m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}"
           "\n</tool_response><|im_end|>\n{% elif m['role'] == 'assistant' and m.get('tool_calls') %}<|im_start|>"
           "assistant\n{% if m['content'] %}{{ m['content'] }}\n{% endif %}{% for c in m['tool_calls'] %}<tool_call>\n"
           "{\"name\": \"{{ c['function']['name'] }}\", \"arguments\": {{ c['function']['arguments'] | tojson }}}"
           "\n</tool_call>{% endfor %}<|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
           "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


class Scripted:
    """An engine that answers each turn with a fixed text (then <|im_end|>): the model's words are given, so the test
    is of what the runner, the tool and the template make of them. Log-probs 0.0."""

    def __init__(self, tok, turns):
        end = tok.convert_tokens_to_ids("<|im_end|>")
        self.turns = [tok(t, add_special_tokens=False)["input_ids"] + [end] for t in turns]

    def continue_ids(self, seqs, max_new, stops, sampling, seeds=None, keys=None):
        ids = self.turns.pop(0)
        return [(ids, [0.0] * len(ids)) for _ in seqs]


@pytest.fixture(scope="module")
def smollm2_tok():
    from transformers import AutoTokenizer

    from reasoning_rl.models.sources import resolve

    return AutoTokenizer.from_pretrained(resolve("smollm2-135m-instruct", log=lambda *_: None))


CALL = '<tool_call>\n{"name": "python", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'


def _qwen3():
    """The Qwen3 template TRL ships (the one it trains Qwen3 tool use with); the case is skipped if TRL moves it."""
    try:
        from trl.chat_template_utils import qwen3_chat_template
    except ImportError:
        pytest.skip("this TRL ships no trl.chat_template_utils.qwen3_chat_template")
    return qwen3_chat_template


@pytest.mark.slow  # SmolLM2's tokenizer (the model converted once, about half a minute on a fresh machine)
@pytest.mark.timeout(300)
@pytest.mark.parametrize("template, tools, call, mismatch", [
    (TOOLISH, False, CALL, False),  # written as the template writes it: the episode is the template's conversation
    (TOOLISH, False, CALL.replace('": ', '":'), True),  # without spaces: run, trained as sampled, and reported
    # Qwen3's template (as TRL ships it), the tool's schema in its system prompt: the tool turn splices exactly; the
    # template renders the last assistant turn with an empty think block the model never wrote, which is reported
    (None, True, CALL, "last turn"),
])
def test_a_structured_tool_call_runs_and_is_checked_against_the_templates_rendering(tool, smollm2_tok, template,
                                                                                    tools, call, mismatch):
    """tool_format chat with the template's own call format: the model's <tool_call> JSON runs on the sandbox, the
    turn joins the conversation as a structured `tool_calls` message, and the episode's ids are compared with the
    template's rendering of that conversation (a call the template would write differently is reported)."""
    import copy

    from reasoning_rl.rollout.environments import PythonTool
    from reasoning_rl.rollout import SamplingConfig

    tok = copy.deepcopy(smollm2_tok)
    tok.chat_template = template or _qwen3()
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    schemas = PythonTool.TOOLS if tools else None
    row = {"prompt_id": "a", "messages": messages, **({"tools": schemas} if tools else {}),
           "prompt": tok.apply_chat_template(messages, tools=schemas, tokenize=False, add_generation_prompt=True)}
    assert ("python" in row["prompt"]) is tools  # the schema is in the prompt only when given
    engine = Scripted(tok, ["Let me compute.\n" + call, "The answer is \\boxed{42}."])
    end = tok.convert_tokens_to_ids("<|im_end|>")
    (e,) = run_episodes(None, tok, tool, [row], SamplingConfig(temperature=0.0, max_tokens=64),
                        EpisodeLimits(max_turns=3, max_tool_calls=2, max_episode_tokens=300, tool_format="chat"),
                        stop_ids=[end], engine=engine)
    assert e.reason == "answer" and e.tool_calls == 1 and "42" in e.turns[0].observation
    assert e.conv[1] == {"role": "assistant", "content": "Let me compute.", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}]}
    assert e.conv[2] == {"role": "tool", "content": e.turns[0].observation}
    if mismatch == "last turn":  # everything up to the final turn is the template's conversation
        assert e.turns[-1].template_mismatch == len(e.prompt_ids) + len(e.ids) - e.turns[-1].tokens
        return
    assert (e.turns[-1].template_mismatch is not None) is mismatch
    if not mismatch:  # token for token the template's conversation (which closes the last turn with a newline)
        full = tok.apply_chat_template(e.conv, tools=schemas, tokenize=True)
        full = list(full["input_ids"] if hasattr(full, "keys") else full)
        assert e.prompt_ids + e.ids + tok("\n", add_special_tokens=False)["input_ids"] == full


@pytest.mark.slow  # the real model (converted once, about half a minute on a fresh machine) and a few greedy turns
@pytest.mark.timeout(600)
@pytest.mark.parametrize("template, tool_message", [
    (None, "<|im_start|>tool\n{}<|im_end|>\n"),  # SmolLM2's own: a `tool` role turn
    (QWENISH, "<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n"),
])
def test_chat_format_episodes_are_the_templates_conversation_token_for_token(smollm2, monkeypatch, template,
                                                                             tool_message):
    """tool_format chat on the real model: each turn ends at the model's <|im_end|>; the observation is the
    template's tool message and the next assistant header, tokenized once; the whole episode's ids are
    apply_chat_template of the conversation (no mismatch reported), and the sampled ids are kept as sampled."""
    import copy

    from reasoning_rl.rollout import SamplingConfig

    model, tok = smollm2
    if template:
        tok = copy.deepcopy(tok)
        tok.chat_template = template
    sampled = _record_sampling(monkeypatch)
    messages = [{"role": "user", "content": "What is 2+2? Answer with the number only."}]
    row = {"prompt_id": "a", "messages": messages,
           "prompt": tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)}
    limits = EpisodeLimits(max_turns=2, max_tool_calls=1, max_episode_tokens=200, tool_format="chat")
    (e,) = run_episodes(model, tok, EveryTurnIsACall(), [row], SamplingConfig(temperature=0.0, max_tokens=24), limits)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    first = sampled[0][0]
    assert first[-1] == end, "the first turn must end the model's turn for the test to mean anything"
    obs = tok("\n" + tool_message.format(EveryTurnIsACall.OBS) + "<|im_start|>assistant\n",
              add_special_tokens=False)["input_ids"]
    assert e.ids == first + obs + sampled[1][0][:len(e.ids) - len(first) - len(obs)]
    assert e.loss_mask == [1] * len(first) + [0] * len(obs) + [1] * (len(e.ids) - len(first) - len(obs))
    assert e.conv[1] == {"role": "assistant", "content": tok.decode(first[:-1], skip_special_tokens=False)}
    assert e.conv[2] == {"role": "tool", "content": EveryTurnIsACall.OBS}
    assert all(t.template_mismatch is None for t in e.turns)
    full = tok.apply_chat_template(e.conv, tokenize=True)
    full = list(full["input_ids"] if hasattr(full, "keys") else full)
    assert full[:len(e.prompt_ids) + len(e.ids)] == e.prompt_ids + e.ids


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_template_that_rewrites_earlier_turns_is_reported_not_hidden(smollm2):
    import copy

    from reasoning_rl.rollout.episodes import episode_metrics
    from reasoning_rl.rollout import SamplingConfig

    model, tok = smollm2
    tok = copy.deepcopy(tok)
    tok.chat_template = FORGETFUL
    messages = [{"role": "user", "content": "What is 2+2? Answer with the number only."}]
    row = {"prompt_id": "a", "messages": messages,
           "prompt": tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)}
    limits = EpisodeLimits(max_turns=2, max_tool_calls=1, max_episode_tokens=200, tool_format="chat")
    (e,) = run_episodes(model, tok, EveryTurnIsACall(), [row], SamplingConfig(temperature=0.0, max_tokens=24), limits)
    # the first assistant turn's words are where the template and the episode part
    assert e.turns[-1].template_mismatch == len(e.prompt_ids)
    assert episode_metrics([e.sample()])["tools/template_mismatch"] == 1.0


def test_chat_format_needs_the_chat_messages(tiny):
    from reasoning_rl.errors import UserError

    model, tok = tiny
    with pytest.raises(UserError, match="grpo.tool_format: value 'chat'"):
        run_episodes(model, tok, EveryTurnIsACall(), [{"prompt_id": "a", "prompt": "1+1="}], _sampling(),
                     EpisodeLimits(tool_format="chat"))


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
