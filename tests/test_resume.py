"""Kill-and-resume: a GRPO or PPO run killed with SIGKILL and resumed continues the same trajectory; so does an
async GRPO run (max_staleness 1, the worker engine), whose checkpoint holds the round already requested."""
import json
import os
import signal
import subprocess
import time

import pytest
import torch

from .conftest import PY, run_env

# No SFT warm start (it cost the test minutes): a length term beside `math` gives every group spread rewards, so
# the tiny model's random-start updates are real ones and the trajectory is worth comparing.
START = ["model.sft_warm_start=false", "model.tiny.num_layers=2",
         "tasks.reward=[{verifier: math, weight: 1.0}, {verifier: soft_length, weight: 1.0, "
         "options: {max_length: 8, cache_length: 7}}]", "generation.max_tokens=8"]
OVERRIDES = {  # 6 steps, a checkpoint every 2, 6 prompts x 4 samples per step
    "grpo": ["grpo.steps=6", "grpo.checkpoint_every=2", "grpo.prompts_per_step=6", "grpo.group_size=4",
             "grpo.eval_every=3", "eval.size=30", "grpo.train_prompts=48", "grpo.filter_mixed=false",
             "grpo.verifier_workers=1", "grpo.lr=3e-4"],
    # PPO: two minibatches per epoch, and the adaptive KL controller's coefficient is state too
    "ppo": ["ppo.steps=6", "ppo.checkpoint_every=2", "ppo.prompts_per_step=6", "ppo.group_size=4",
            "ppo.eval_every=3", "eval.size=30", "ppo.train_prompts=48", "ppo.verifier_workers=1", "ppo.lr=3e-4",
            "ppo.minibatch_size=12", "ppo.adaptive_kl=true", "ppo.kl_horizon=10"],
}
OVERRIDES["grpo-async"] = OVERRIDES["grpo"] + ["grpo.engine=worker", "grpo.max_staleness=1"]


def _cmd(run, out, *extra):
    args = [PY, "-m", "reasoning_rl", "train", run.split("-")[0], "--set", f"output_dir={out}", *extra]
    for o in START + OVERRIDES[run]:
        args += ["--set", o]
    return args


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")  # nothing is cached without a warm start; kept off the user's cache


def _metrics(out):
    rows = [json.loads(x) for x in open(os.path.join(out, "metrics.jsonl")).read().splitlines()]
    wall_clock = ("time/", "throughput/")  # timings and tokens per second differ between any two runs
    return {r["step"]: {k: v for k, v in r.items() if not k.startswith(wall_clock)} for r in rows}


@pytest.mark.timeout(900)
# slow tests (CI runs them): the fast suite's resume check is tests/test_interrupts.py (a stopped run resumed onto
# the uninterrupted trajectory); here a SIGKILLed run, for GRPO, PPO (the critic too) and async GRPO
@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "ppo", "grpo-async"])
def test_killed_run_resumes_on_the_same_trajectory(tmp_path, cache, algo):
    env = run_env(REASONING_RL_CACHE=str(cache))
    a, b = tmp_path / "a", tmp_path / "b"
    r = subprocess.run(_cmd(algo, a), capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]

    proc = subprocess.Popen(_cmd(algo, b), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # kill between checkpoints: after step 3 was logged
            p = b / "metrics.jsonl"
            if p.exists() and any(json.loads(x)["step"] == 3 for x in p.read_text().splitlines() if x.strip()):
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert (b / "checkpoint" / "state.pt").exists()

    r = subprocess.run(_cmd(algo, b, "--resume"), capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    ma, mb = _metrics(a), _metrics(b)
    assert sorted(mb) == sorted(ma) == list(range(7))  # no step lost or logged twice
    assert any(ma[s].get("train/samples") for s in range(1, 7)), "nothing was trained: the test would prove nothing"
    assert all(ma[s]["reward/std"] > 0 for s in range(1, 7)), "rewards without spread: no update would move"
    for step in range(1, 7):
        for key, va in ma[step].items():
            vb = mb[step][key]
            assert vb == pytest.approx(va, rel=1e-5, abs=1e-6), (step, key, va, vb)
    wa = torch.load(a / "checkpoint" / "state.pt", weights_only=False)["model"]
    wb = torch.load(b / "checkpoint" / "state.pt", weights_only=False)["model"]
    assert all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)
    if algo == "ppo":  # the critic and the KL coefficient continued too
        ea = torch.load(a / "checkpoint" / "state.pt", weights_only=False)["extra"]
        eb = torch.load(b / "checkpoint" / "state.pt", weights_only=False)["extra"]
        assert all(torch.allclose(ea["critic"][k], eb["critic"][k], atol=1e-6) for k in ea["critic"])
        assert eb["kl"]["coef"] == pytest.approx(ea["kl"]["coef"], rel=1e-6) and ea["kl"]["coef"] != 0.02
    na = len((a / "archive.jsonl").read_text().splitlines())
    assert na == len((b / "archive.jsonl").read_text().splitlines()) == 6 * 6 * 4


SAVER = """
import sqlite3, sys
import torch
from reasoning_rl.trainers import checkpoint

out = sys.argv[1]
m = torch.nn.Linear(256, 256)
opt = torch.optim.AdamW(m.parameters())
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
conn = sqlite3.connect(":memory:")
step = 0
while True:
    step += 1
    with torch.no_grad():
        m.weight.fill_(step)
    checkpoint.save(out, step, m, opt, sched, {}, conn, ())
    print(step, flush=True)
"""


@pytest.mark.timeout(300)
def test_a_checkpoint_killed_mid_save_leaves_the_previous_or_the_new_one(tmp_path):
    """SIGKILL a process that saves checkpoints back to back, at random moments: what is left is always a whole
    checkpoint (the last one reported saved, or the one being saved), and no temporary or set-aside copy remains."""
    import random

    from reasoning_rl.trainers import checkpoint

    rng = random.Random(0)
    out = tmp_path / "run"
    out.mkdir()
    outcomes = set()
    for trial in range(3):
        proc = subprocess.Popen([PY, "-c", SAVER, str(out)], stdout=subprocess.PIPE, text=True, env=run_env())
        last = int(proc.stdout.readline())  # one save done in this process
        time.sleep(rng.uniform(0.0, 0.05))
        proc.kill()
        reported = [int(x) for x in proc.stdout.read().split()]
        proc.wait(30)
        last = reported[-1] if reported else last
        assert checkpoint.exists(str(out))
        state = torch.load(out / "checkpoint" / "state.pt", weights_only=False)
        assert state["step"] in (last, last + 1), (trial, state["step"], last)
        assert float(state["model"]["weight"][0, 0]) == state["step"]  # the whole state of that step
        outcomes.add(state["step"] - last)
        assert sorted(p.name for p in out.iterdir()) == ["checkpoint"]  # no .tmp-* or .old-* left
    assert outcomes  # (which of the two each kill left depends on where it landed)


@pytest.mark.parametrize("left", ["partial copy beside the old one", "old one moved aside, new one not in place",
                                  "new one in place, old one not yet removed"])
def test_recovery_after_a_save_killed_between_its_steps(tmp_path, left):
    """Each state a kill can leave inside `checkpoint.save` (between its file operations, too short a window for the
    random kills above to find): recovery gives a whole checkpoint, the previous one or the new one."""
    from reasoning_rl.data.run_dir import recover_checkpoint

    def ckpt(name, step):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state.pt").write_text(str(step))

    if left == "partial copy beside the old one":
        ckpt("checkpoint", 3)
        (tmp_path / "checkpoint.tmp-99").mkdir()  # state.pt not written yet
        expected = 3
    elif left == "old one moved aside, new one not in place":
        ckpt("checkpoint.old-99", 3)
        ckpt("checkpoint.tmp-99", 4)
        expected = 3
    else:
        ckpt("checkpoint.old-99", 3)
        ckpt("checkpoint", 4)
        expected = 4
    recover_checkpoint(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    assert (tmp_path / "checkpoint" / "state.pt").read_text() == str(expected)


FINISH = ["train", "grpo", "--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1",
          "--set", "grpo.prompts_per_step=4", "--set", "grpo.group_size=4", "--set", "grpo.filter_mixed=false",
          "--set", "grpo.eval_every=0", "--set", "grpo.eval_at_start=false", "--set", "grpo.eval_at_end=false",
          "--set", "grpo.verifier_workers=1", "--set", "generation.max_tokens=6", "--set", "grpo.train_prompts=16"]


def _steps_logged(out):
    return [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]


def test_resume_of_a_finished_run_does_nothing_and_says_so_and_more_steps_extend_it(tmp_path, capsys, monkeypatch):
    """A run that ended records it (finished.json, a checkpoint of its last step): `--resume` then does nothing and
    says how to extend it; with more steps it goes on from the end, and a second Ctrl-C during the extension loses
    none of the rounds logged before it."""
    from reasoning_rl.cli import main
    from reasoning_rl.trainers import loop

    out = tmp_path / "run"
    run = [*FINISH, "--set", f"output_dir={out}", "--set", "grpo.checkpoint_every=2"]
    assert main([*run, "--set", "grpo.steps=3"]) == 0
    assert _steps_logged(out) == [1, 2, 3] and json.loads((out / "finished.json").read_text())["checkpoint_step"] == 3
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main([*run, "--set", "grpo.steps=3", "--resume"]) == 0
    assert capsys.readouterr().err.strip().splitlines() == [
        f"reasoning-rl train grpo --resume: the run in {out} finished all its 3 steps (final/ holds its model); "
        "nothing to do. To extend it: --resume --set grpo.steps=N with N > 3"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before  # nothing touched

    real = loop._round

    def second_ctrl_c(run_, algo, step, tally):
        if step == 5:
            raise KeyboardInterrupt  # pressed twice: stops at once, inside round 5
        return real(run_, algo, step, tally)

    monkeypatch.setattr(loop, "_round", second_ctrl_c)
    assert main([*run, "--set", "grpo.steps=6", "--resume"]) == 130
    assert _steps_logged(out) == [1, 2, 3, 4]  # the rounds before it are kept (step 4 logged, checkpointed at 4)
    monkeypatch.setattr(loop, "_round", real)
    assert main([*run, "--set", "grpo.steps=6", "--resume"]) == 0
    assert _steps_logged(out) == [1, 2, 3, 4, 5, 6]
    assert json.loads((out / "finished.json").read_text())["steps"] == 6


def test_a_finished_run_without_a_last_checkpoint_is_not_extended(tmp_path, capsys):
    from reasoning_rl.cli import main

    out = tmp_path / "run"
    run = [*FINISH, "--set", f"output_dir={out}", "--set", "grpo.checkpoint_every=0"]
    assert main([*run, "--set", "grpo.steps=2"]) == 0
    capsys.readouterr()
    assert main([*run, "--set", "grpo.steps=4", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "finished at step 2 but its checkpoint holds step None" in err[0]
