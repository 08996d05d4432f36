"""Ctrl-C and SIGTERM on a real training run (a `python -m reasoning_rl train grpo` subprocess): the first stops it
after the round in progress with a checkpoint of that round, one line on stderr and exit status 130, no traceback
and no temporary files; `--resume` then continues the very trajectory of an uninterrupted run. A second signal
stops it at once, still leaving only whole checkpoints. The signal is sent at each phase of a round (sampling,
verification, the update, the checkpoint write) by the function that runs it, in the run's own process. Other
commands: one line, 130, and their results written whole or not at all."""
import json
import os
import signal
import subprocess
import time

import pytest
import torch

from .conftest import PY, ROOT, run_env

# the tiny model from random weights (no warm start); a length term gives every group spread rewards
RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=2", "generation.max_tokens=8",
       "tasks.reward=[{verifier: math, weight: 1.0}, {verifier: soft_length, weight: 1.0, "
       "options: {max_length: 8, cache_length: 7}}]",
       "grpo.steps=6", "grpo.prompts_per_step=6", "grpo.group_size=4", "grpo.filter_mixed=false", "grpo.lr=3e-4",
       "grpo.verifier_workers=1", "grpo.checkpoint_every=0", "grpo.eval_every=3", "eval.size=20",
       "grpo.train_prompts=48"]


def _cmd(out, *extra):
    args = [PY, "-m", "reasoning_rl", "train", "grpo", "--set", f"output_dir={out}", *extra]
    for o in RUN:
        args += ["--set", o]
    return args


def _metrics(out):
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: {k: v for k, v in r.items() if not k.startswith(("time/", "throughput/"))} for r in rows}


def _leftovers(out):
    return [p.name for p in out.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "run"
    r = subprocess.run(_cmd(out), capture_output=True, text=True, env=run_env(), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return _metrics(out)


def _start_and_signal(out, sig, after_step, delay, times=1):
    """Start a run, wait for `after_step` in its metrics, then `delay` of a round (the fraction of the time the
    round before took: on an idle machine a round of this run is a fraction of a second, so a fixed delay could land
    after the last round), then send `sig`; with `times` 2, the second once the run has said it received the first
    (two signals sent before its handler ran would be one: the operating system does not queue them). Returns the
    finished process's (exit status, stderr)."""
    import threading

    proc = subprocess.Popen(_cmd(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=run_env(PYTHONUNBUFFERED="1"))  # its log lines as they are written
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    seen: dict[int, float] = {}
    while time.monotonic() < deadline:
        p = out / "metrics.jsonl"
        steps = [json.loads(x)["step"] for x in p.read_text().splitlines() if x.strip()] if p.exists() else []
        for s in steps:
            seen.setdefault(s, time.monotonic())
        if after_step in seen:
            break
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        time.sleep(0.01)
    round_s = seen[after_step] - seen.get(after_step - 1, seen[after_step])
    time.sleep(delay * round_s)
    for i in range(times):
        proc.send_signal(sig)
        heard = time.monotonic() + 60
        while i + 1 < times and not any("stopping after the round in progress" in x for x in said):
            assert time.monotonic() < heard and proc.poll() is None, "the run never said it received the signal"
            time.sleep(0.005)
    err = proc.stderr.read()
    proc.wait(timeout=300)
    reader.join(timeout=10)
    return proc.returncode, err


@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig, delay", [(signal.SIGINT, 0.0),  # early in a round: sampling
                                        pytest.param(signal.SIGINT, 0.6, marks=pytest.mark.slow),  # later in it
                                        pytest.param(signal.SIGTERM, 0.3, marks=pytest.mark.slow)])  # (of a round)
def test_the_first_signal_stops_after_the_round_and_resume_continues_the_trajectory(tmp_path, uninterrupted, sig,
                                                                                     delay):
    out = tmp_path / "run"
    rc, err = _start_and_signal(out, sig, after_step=2, delay=delay)
    assert rc == 130, err[-2000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("reasoning-rl train grpo: stopped by " + signal.Signals(sig).name) and "--resume" in last
    steps = sorted(_metrics(out))
    state = torch.load(out / "checkpoint" / "state.pt", weights_only=False)
    assert state["step"] == steps[-1] and 2 <= steps[-1] < 6  # the round in progress finished and was saved
    assert _leftovers(out) == [] and not (out / "final").exists()

    # a changed sampling knob would not continue this trajectory: refused, with the key named, before anything loads
    r = subprocess.run(_cmd(out, "--resume", "--set", "generation.temperature=0.5"), capture_output=True, text=True,
                       env=run_env(), timeout=600)
    assert r.returncode == 2 and "generation.temperature: 1.0 -> 0.5" in r.stderr and "--resume-changed" in r.stderr
    r = subprocess.run(_cmd(out, "--resume"), capture_output=True, text=True, env=run_env(), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    resumed = _metrics(out)
    assert sorted(resumed) == sorted(uninterrupted) == list(range(7))
    for step in range(1, 7):
        for key, v in uninterrupted[step].items():
            assert resumed[step][key] == pytest.approx(v, rel=1e-5, abs=1e-6), (step, key)


# where in a round the signal arrives: (phase, the function it arrives in, which of its calls, extra settings,
# the step the run stops after); each of these functions is called once a round in this run
PHASES = [
    # sampling and verification under SIGINT are slow-marked: the first test's delay 0.0 already lands in sampling
    pytest.param("sampling", "reasoning_rl.trainers.loop._make_round", 3, [], 3, marks=pytest.mark.slow),
    pytest.param("verification", "reasoning_rl.task.task.Task.verify_samples", 3, [], 3, marks=pytest.mark.slow),
    ("the update", "reasoning_rl.trainers.loop._train_epochs", 3, [], 3),
    # a save of every round; the signal during round 3's lands after that round decided not to stop: the run
    # stops after round 4, with its checkpoint
    ("the checkpoint write", "reasoning_rl.trainers.checkpoint.save", 3, ["grpo.checkpoint_every=1"], 4),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("phase, target, call, extra, stops_after", PHASES, ids=[p.values[0] if hasattr(p, "values") else p[0] for p in PHASES])
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_in_any_phase_of_a_round_stops_after_it_and_resume_continues(tmp_path, uninterrupted, phase, target,
                                                                             call, extra, stops_after, sig):
    """The run (tests/helpers/signal_in_phase.py, a process of its own) sends the signal to itself from inside
    `target` on its `call`-th call: the signal arrives in that phase of a round, never between rounds."""
    out = tmp_path / "run"
    settings = [x for o in [*RUN, *extra] for x in ("--set", o)]
    r = subprocess.run([PY, "-m", "tests.helpers.signal_in_phase", target, str(call), sig.name, "--", "train", "grpo",
                        "--set", f"output_dir={out}", *settings], capture_output=True, text=True, env=run_env(),
                       timeout=600, cwd=ROOT)
    assert r.returncode == 130 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith(f"reasoning-rl train grpo: stopped by {sig.name} after step")
    assert int(r.stdout.strip().splitlines()[-1]) >= call  # the signal was sent
    steps = sorted(_metrics(out))
    assert steps == list(range(steps[0], stops_after + 1))
    assert torch.load(out / "checkpoint" / "state.pt", weights_only=False)["step"] == steps[-1]
    assert _leftovers(out) == [] and not (out / "final").exists()

    r = subprocess.run([PY, "-m", "reasoning_rl", "train", "grpo", "--resume", "--set", f"output_dir={out}",
                        *settings], capture_output=True, text=True, env=run_env(), timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    resumed = _metrics(out)
    assert sorted(resumed) == sorted(uninterrupted)
    for step in range(1, 7):
        for key, v in uninterrupted[step].items():
            assert resumed[step][key] == pytest.approx(v, rel=1e-5, abs=1e-6), (phase, step, key)


@pytest.mark.timeout(600)
def test_a_second_signal_stops_at_once_and_leaves_only_whole_checkpoints(tmp_path):
    out = tmp_path / "run"
    rc, err = _start_and_signal(out, signal.SIGINT, after_step=1, delay=0.0, times=2)
    assert rc == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("reasoning-rl train grpo: interrupted; stopped at once")
    assert _leftovers(out) == []
    if (out / "checkpoint").exists():  # stopped after the first signal's checkpoint was written, or before
        assert torch.load(out / "checkpoint" / "state.pt", weights_only=False)["step"] >= 1


def test_ctrl_c_in_any_other_command_is_one_line_and_130(monkeypatch, capsys):
    from reasoning_rl.cli import commands as cli

    def interrupted(args):
        raise KeyboardInterrupt

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_func(parser(), interrupted))
    assert cli.main(["sft"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["reasoning-rl sft: interrupted; stopped at once (the last complete checkpoint, if any, is kept)"]


def _with_func(parser, func):
    """The parser with every subcommand's function replaced by `func`."""
    for action in parser._actions:
        for sub in getattr(action, "choices", None) or {}:
            if hasattr(action.choices[sub], "set_defaults"):
                action.choices[sub].set_defaults(func=func)
    return parser


# (what changed since the checkpoint, kept or broken): how `--resume` classifies a change
RESUME_CHANGES = [
    ({"grpo": {"steps": 12}}, "kept"),  # more (or fewer) rounds
    ({"grpo": {"eval_every": 5}}, "kept"),
    ({"grpo": {"checkpoint_every": 1}}, "kept"),
    ({"eval": {"size": 50}}, "kept"),  # the held-out score's size, not the trajectory
    ({"monitor": {"window": 8}}, "kept"),
    ({"ppo": {"lr": 1.0}}, "kept"),  # another trainer's section: not read by GRPO
    ({"generation": {"temperature": 0.5}}, "broken"),  # sampling
    ({"grpo": {"lr": 1e-3}}, "broken"),  # the optimiser
    ({"grpo": {"group_size": 16}}, "broken"),
    ({"tasks": {"source": "other.jsonl"}}, "broken"),  # the data
    ({"model": {"name_or_path": "other"}}, "broken"),  # the model
    ({"sft": {"steps": 10}}, "broken"),  # the warm start, and with it the reference policy
    ({"seed": 1}, "broken"),
]


@pytest.mark.parametrize("change, expected", RESUME_CHANGES)
def test_resume_says_which_changes_keep_the_trajectory(change, expected):
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.checkpoint import resume_changes

    saved = config.to_dict(Config())
    now = config.to_dict(Config())
    for section, value in change.items():
        if isinstance(value, dict):
            now[section].update(value)
        else:
            now[section] = value
    kept, broken = resume_changes(saved, now, "grpo")
    assert (kept, broken) != ([], [])
    assert (broken == []) == (expected == "kept"), (kept, broken)


@pytest.mark.slow  # accelerate launches two ranks, twice
@pytest.mark.timeout(600)
def test_ctrl_c_under_accelerate_launch_stops_every_rank_after_the_same_round(tmp_path):
    """Ctrl-C in a terminal reaches the launcher and both ranks (one process group), and the launcher forwards it to
    the ranks again: the run still stops after one round, the same on both ranks, with the checkpoint of it, one
    line and exit status 130; `--resume` under the same launcher then finishes the run."""
    import shutil
    import sys
    from pathlib import Path

    from .conftest import ROOT

    out = tmp_path / "run"
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    cmd = [accelerate, "launch", "--config_file", str(ROOT / "examples/accelerate/ddp_cpu.yaml"), "-m",
           "reasoning_rl", "train", "grpo"]
    for o in ["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=30", "grpo.prompts_per_step=6",
              "grpo.group_size=4", "grpo.filter_mixed=false", "grpo.sampler=uniform", "grpo.eval_every=0",
              "grpo.eval_at_start=false", "grpo.eval_at_end=false", "grpo.checkpoint_every=0",
              "grpo.verifier_workers=1", "grpo.train_prompts=64", f"output_dir={out}"]:
        cmd += ["--set", o]
    env = run_env(OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, as a terminal's foreground job
    try:
        deadline = time.monotonic() + 300
        while not ((out / "metrics.jsonl").exists() and len((out / "metrics.jsonl").read_text().splitlines()) >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        stdout, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    said = [x for x in err.splitlines() if x.startswith("reasoning-rl train grpo:")]
    assert len(said) == 1 and said[0].startswith("reasoning-rl train grpo: stopped by SIGINT") and "--resume" in said[0]
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, steps[-1] + 1)) and steps[-1] < 30
    assert torch.load(out / "checkpoint" / "state.pt", weights_only=False)["step"] == steps[-1]
    assert _leftovers(out) == [] and not (out / "final").exists()
    # resumed under the same launcher, it continues from that round to the end (every rank wrote its part)
    r = subprocess.run(cmd + ["--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stdout and "resharded" not in r.stdout
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == list(range(1, 31))
    assert (out / "final" / "config.json").exists()


def _files(d):
    """Every file under `d` with its bytes (what an interrupted command must leave as it was)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()} if d.exists() else {}


def test_ctrl_c_while_curate_pairs_or_reverify_write_leaves_what_was_there(tmp_path, monkeypatch, capsys):
    """Each of these commands writes its results at its end, all of them or none: a Ctrl-C (KeyboardInterrupt)
    raised after the first of its files is written leaves the output as it was before the command (the results of
    an earlier run there byte for byte; nothing for a first run) and no temporary folder, exit 130 and one line.
    (`eval` keeps its work instead, a batch at a time: tests/test_eval_resume.py; its uninterrupted run here is
    what pairs and reverify read.)"""
    from datasets import Dataset

    from reasoning_rl.data import archive
    from reasoning_rl.cli import reverify
    from reasoning_rl.cli import main

    model = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set",
             "generation.max_tokens=6"]
    ev = tmp_path / "eval"
    commands = {  # name: (argv, what it writes, a function called while it writes)
        "eval": (["eval", *model, "--limit", "4", "-n", "4", "--set", f"output_dir={ev}"], ev,
                 (archive, "write_groups")),
        "curate": (["curate", *model, "--limit", "4", "-n", "4", "-o", str(tmp_path / "cur")], tmp_path / "cur",
                   (Dataset, "save_to_disk")),
        "pairs": (["pairs", "--archive", str(ev / "archive.jsonl"), "-o", str(tmp_path / "pairs")],
                  tmp_path / "pairs", (Dataset, "to_parquet")),
        "reverify": (["reverify", str(ev)], ev / "reverify", (reverify, "_plot")),
    }
    assert main(commands.pop("eval")[0]) == 0
    for name, (argv, out, (owner, fn)) in commands.items():
        original = getattr(owner, fn)

        def interrupted(*a, **k):
            original(*a, **k)  # the file is written (to the staging folder) ...
            raise KeyboardInterrupt  # ... and Ctrl-C arrives before the others are

        assert main(argv) == 0, name  # an earlier run's results are there
        before = _files(out)
        assert before, name
        capsys.readouterr()
        monkeypatch.setattr(owner, fn, interrupted)
        assert main(argv) == 130, name
        monkeypatch.setattr(owner, fn, original)
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"reasoning-rl {name}: interrupted; stopped at once (its results are written whole or not at all: nothing "
            "was written)")
        assert _files(out) == before, name
        assert not list(tmp_path.rglob("*.tmp-*")), name
