"""Gold solutions as calculator episodes (tasks.target_format=calculator): the turns a solution becomes, the
calculator's exact answers, and SFT rows whose ids and loss masks are what an RL episode with the calculator holds."""
from __future__ import annotations

import json

import pytest

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.errors import UserError
from reasoning_rl.rollout.environments import ENVIRONMENTS, calculate
from reasoning_rl.task.solutions import calculator_segments
from reasoning_rl.task.task import Task

# (gold solution, the episode's turns: the model's text up to a call and the value the solution gives it, then the
# closing text)
SEGMENTS = [
    # GSM8K: each annotation a call where it stands, the text after it on the calculator's new line
    ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
     [("Natalia sold 48/2 = <<48/2>>", "24"), ("24 clips in May.\nNatalia sold 48+24 = <<48+24>>", "72"),
      ("72 clips.\nThe answer is \\boxed{72}.", "")]),
    # MAWPS/ASDiv-A: a line that is an equation is a call of its left side
    ("56 * 9 = 504\n#### 504", [("<<56 * 9>>", "504"), ("The answer is \\boxed{504}.", "")]),
    ("( 41 + 57 ) - 12 = 86\n#### 86", [("<<( 41 + 57 ) - 12>>", "86"), ("The answer is \\boxed{86}.", "")]),
    # a line of prose between two calls stays the model's text
    ("He has 3 * 4 = <<3*4=12>>12 cars.\nThen he sells some.\n12 - 5 = 7\n#### 7",
     [("He has 3 * 4 = <<3*4>>", "12"), ("12 cars.\nThen he sells some.\n<<12 - 5>>", "7"),
      ("The answer is \\boxed{7}.", "")]),
    ("There are 5 apples.\n#### 5", None),  # nothing to compute
    ("no final marker 3 + 4 = 7", None),  # no '####'
    ("x = 7\n#### 7", None),  # an assignment, not a calculation
]


@pytest.mark.parametrize("solution, turns", SEGMENTS)
def test_a_gold_solution_becomes_calculator_turns(solution, turns):
    assert calculator_segments(solution) == turns


# (expression, what the calculator answers)
CALCULATIONS = [("37*48", "1776"), ("48/2", "24"), ("12/60", "0.2"), ("0.2*50", "10"), ("0.36-0.05", "0.31"),
                ("7/3", "2.333333"), ("-3/4", "-0.75"), ("(41 + 57) - 12", "86"), ("17//5", "3"), ("17%5", "2"),
                ("1,000*3", "3000")]


@pytest.mark.parametrize("expression, value", CALCULATIONS)
def test_the_calculator_is_exact(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize("expression", ["9**9**9", "open('x')", "a+1", "1/0", "1e300*1e300", "[1, 2]"])
def test_the_calculator_refuses_what_is_not_arithmetic(expression):
    env = ENVIRONMENTS.get("calculator")()
    step = env.respond([None], [f"<<{expression}>>"])[0]
    assert step.program_error and step.observation.startswith("=error: ")


def _task(tmp_path, rows, **extra):
    f = tmp_path / "data.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    over = [f"tasks.source={f}", "tasks.preset=gsm8k", "tasks.target_format=calculator", "tasks.heldout_percent=10",
            "grpo.environment=calculator", "model.sft_warm_start=false", *[f"{k}={v}" for k, v in extra.items()]]
    cfg = config.load(Config, None, over)
    from reasoning_rl.models.load import load_tokenizer

    tok = load_tokenizer(cfg)
    task = Task.from_config(cfg.tasks)
    task.render(tok)
    return cfg, task, tok


def test_gold_targets_are_episodes_with_the_calculators_answers_masked_off(tmp_path):
    from reasoning_rl.data.gold_traces import gold_targets

    rows = [{"question": f"{a} boxes of {b}?", "answer": f"{a} * {b} = {a * b}\n#### {a * b}"}
            for a in range(2, 12) for b in range(3, 7)]
    rows.append({"question": "A broken row?", "answer": "6 * 7 = 41\n#### 41"})  # the data's own noise
    rows.append({"question": "Nothing to compute?", "answer": "It is 9.\n#### 9"})
    cfg, task, tok = _task(tmp_path, rows)
    targets, summary = gold_targets(task, tok, cfg.grpo)
    assert summary.targets == len(targets) and summary.rows == len(task.train) >= summary.targets
    left = summary.left_out
    assert sum(left.values()) == summary.rows - summary.targets
    by_id = {r["prompt_id"]: r for r in task.train}
    for t in targets:
        text = tok.decode(t["ids"], skip_special_tokens=True)
        masked = tok.decode([i for i, m in zip(t["ids"], t["loss_mask"]) if not m])
        a, b = (int(x) for x in by_id[t["prompt_id"]]["target"].split(" = ")[0].split(" * "))
        assert text == f"<<{a} * {b}>>={a * b}\nThe answer is \\boxed{{{a * b}}}."
        assert masked == f"={a * b}\n"  # only the calculator's answer is off the loss
    train_ids = {r["prompt_id"] for r in task.train}
    broken = [r for r in task.train if r["target"].startswith("6 * 7")]
    assert all(b["prompt_id"] not in {t["prompt_id"] for t in targets} for b in broken)
    if broken:
        assert left["a call the calculator answers otherwise"] == len(broken)
    assert {t["prompt_id"] for t in targets} <= train_ids


def test_calculator_targets_without_the_calculator_are_one_line(tmp_path):
    from reasoning_rl.data.gold_traces import gold_targets

    cfg, task, tok = _task(tmp_path, [{"question": "2 * 3?", "answer": "2 * 3 = 6\n#### 6"}] * 1
                           + [{"question": f"{a} + 1?", "answer": f"{a} + 1 = {a + 1}\n#### {a + 1}"}
                              for a in range(20)])
    with pytest.raises(UserError, match="set grpo.environment=calculator"):
        gold_targets(task, tok, config.load(Config).grpo)


@pytest.fixture(scope="module")
def tok():
    from reasoning_rl.models.load import load_tokenizer

    return load_tokenizer(config.load(Config))


# (the model's scripted turns, whether the episode broke the call format)
BROKEN = [
    (["Each box holds <<4 * 6>>", " so <<24 + 1>>", " The answer is \\boxed{25}."], False),
    (["Each box holds <<4 * 6", " The answer is \\boxed{24}."], True),    # the call never closes
    (["The answer is \\boxed{24}."], False),                              # no call at all: an answer
]


def test_an_episode_that_opens_a_call_it_never_closes_broke_the_format(tok):
    """tools/broken_call (issue: the share of episodes that broke the tool-call format): a turn with the calculator's
    `<<` and no complete call ends the episode as an answer, marked broken; its archive form says so."""
    from reasoning_rl.data.gold_traces import ScriptedTurns
    from reasoning_rl.rollout.base import SamplingConfig
    from reasoning_rl.rollout.environments import ENVIRONMENTS
    from reasoning_rl.rollout.episodes import EpisodeLimits, episode_metrics, run_episodes
    from reasoning_rl.types import Turn

    turns = [t for t, _ in BROKEN]
    limits = EpisodeLimits(max_turns=8, max_tool_calls=8, max_episode_tokens=128)
    eps = run_episodes(None, tok, ENVIRONMENTS.get("calculator")(), [{"prompt_id": str(i), "prompt": "Q"}
                                                                     for i in range(len(turns))],
                       SamplingConfig(max_tokens=128), limits, stop_ids=[tok.eos_token_id],
                       engine=ScriptedTurns(tok, turns, [tok.eos_token_id]))
    samples = [e.sample() for e in eps]
    assert [any(t.broken for t in s.turns) for s in samples] == [b for _, b in BROKEN]
    assert episode_metrics(samples)["tools/broken_call"] == 1 / 3
    last = samples[1].turns[-1]
    assert last.to_dict()["broken"] is True and Turn.from_dict(last.to_dict()) == last
