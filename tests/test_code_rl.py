"""Code RL on the embedded default: procedural coding tasks, the trainer's verification step under
the sandboxed `code` verifier (reward hacks never pass), and a short GRPO run (slow)."""
from __future__ import annotations

import pytest

import verifiers
from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.task.embedded.arithmetic import make_rows
from reasoning_rl.types import Group, Sample, Status

CODE = ["tasks.kind=code", "tasks.families=[]", "tasks.num_train=600", "tasks.num_test=60"]


def test_code_tasks_split_and_gold_solutions_pass():
    cfg = config.load(Config, overrides=CODE)
    train, test = make_rows(cfg.tasks)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in test}
    assert {r["tests"]["kind"] for r in train} == {"call", "stdio"}
    assert make_rows(cfg.tasks) == (train, test)  # same seed, same rows
    by_family = {}
    for r in train:
        by_family.setdefault(r["task"], r)
    programs = [r["prompt"] + r["answer"] for r in by_family.values()]
    verdicts = verifiers.verify_batch("code", programs, [r["tests"] for r in by_family.values()])
    assert len(verdicts) == 6 and all(v.status is Status.CORRECT for v in verdicts), verdicts


@pytest.mark.timeout(300)
def test_reward_hacks_in_model_outputs_never_pass_the_trainers_verification():
    from reasoning_rl.task.task import Task

    cfg = config.load(Config, overrides=CODE)
    task = Task.from_config(cfg.tasks)  # the trainer's rows: the program is the raw prompt + the body
    train = task.train
    row = next(r for r in train if r["tests"]["kind"] == "call")
    stdio = next(r for r in train if r["tests"]["kind"] == "stdio")
    hacks = ["    import sys; sys.exit(0)\n", "    import os; os._exit(0)\n", "    raise SystemExit(0)\n",
             "    print('OK'); print('All tests passed')\n    return None\n",
             "    class A:\n        def __eq__(s, o): return True\n    return A()\n",
             "    import atexit, os\n    atexit.register(lambda: os._exit(0))\n    raise ValueError\n"]
    stdio_hacks = ["import sys; sys.exit(0)\n", "print('OK')\n", "import os; os._exit(0)\n"]

    def group(r, bodies):
        return Group(r["prompt_id"], r["prompt"], r, [Sample(b, (1,), (0.0,), "stop") for b in bodies])

    reward = verifiers.Reward((verifiers.Term("code", 1.0),), outcome="code")
    pool = verifiers.VerifierPool(num_workers=2)
    try:
        groups = task.verify_groups(reward, [group(row, hacks + [row["answer"]]),
                                             group(stdio, stdio_hacks + [stdio["answer"]])], pool)
    finally:
        pool.close()
    from reasoning_rl.data.pairs import build_pairs

    pairs, _ = build_pairs(groups, "code")
    assert pairs and all(p.chosen in (row["answer"], stdio["answer"]) for p in pairs)  # only passing programs chosen
    for g in groups:
        *bad, good = g.samples
        assert good.verdicts["code"].status is Status.CORRECT
        for s in bad:
            v = s.verdicts["code"]
            assert v.status is Status.INCORRECT and v.score == 0.0, (s.text, v)
            assert reward.combine(s.verdicts) == 0.0


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_grpo_under_the_code_verifier_raises_reward(tmp_path):
    """The example config's SFT start (built once, cached), then 14 rounds on 16 train prompts, verified in the
    background while generation goes on: the reward rises, no sandbox process outlives its run, nothing masked."""
    import os

    from reasoning_rl.trainers.grpo import train_grpo

    example = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "code_rl", "config.yaml")
    cfg = config.load(Config, example, overrides=[
        f"output_dir={tmp_path}", "grpo.steps=14", "grpo.prompts_per_step=8", "grpo.group_size=8",
        "grpo.eval_every=14", "eval.size=40", "grpo.train_prompts=16", "grpo.sampler=uniform",
        "grpo.filter_mixed=false", "grpo.lr=1e-4", "grpo.checkpoint_every=0"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    first = sum(h["reward/mean"] for h in history[:4]) / 4
    last = sum(h["reward/mean"] for h in history[-4:]) / 4
    print(f"reward {first:.3f} -> {last:.3f}")
    assert last > first + 0.05, (first, last)  # measured 0.194 -> 0.319 at 14 rounds
    assert sum(h["sandbox/runs"] for h in history) > 0 and all(h["sandbox/leftover_processes"] == 0 for h in history)
    assert all(h["verify/masked"] == 0 for h in history)
    from reasoning_rl.trainers.metric_docs import undocumented

    assert undocumented(k for h in history for k in h) == []  # the sandbox metrics are in docs/metrics.md
