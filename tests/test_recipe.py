"""`reasoning-rl recipe`: every stage runs, writes its folder and its held-out evaluation; a recipe interrupted after a
stage continues with --resume from where it stopped; bad input (no gold solutions, an unknown stage, another config
on resume), a stage that fails and a stage folder half-written by a kill are each one line, nothing earlier lost."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from reasoning_rl.cli import main

from .conftest import ROOT, run_env

TINY = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set", "generation.max_tokens=48",
        "--set", "tasks.heldout_percent=25", "--set", "recipe.eval_size=4", "--set", "sft.steps=2",
        "--set", "grpo.steps=2", "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=2",
        "--set", "recipe.difficulty_rows=8", "--set", "tasks.instruction="]


def _rows(n: int) -> str:
    out = []
    for i in range(n):
        a, b = i % 13 + 1, i // 13 + 2
        out.append(json.dumps({"question": f"{a} + {b} = ?", "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}))
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    f = tmp_path_factory.mktemp("recipe") / "train.jsonl"
    f.write_text(_rows(64))
    return f


def _recipe(data, out, *extra):
    return main(["recipe", "--dataset", str(data), "--preset", "gsm8k", *TINY, "--set", f"output_dir={out}", *extra])


def test_a_data_set_without_gold_solutions_is_one_line_before_anything_loads(tmp_path, capsys):
    f = tmp_path / "plain.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"{a} + 1 = ?", "answer": str(a + 1)}) + "\n" for a in range(20)))
    assert main(["recipe", "--dataset", str(f), "--preset", "trl", *TINY, "--set", f"output_dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert "tasks.target_col" in err and "no train row" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("extra, says", [
    (["--set", "recipe.stages=[sft, grpo, fly]"], "names an unknown stage 'fly'"),  # a typo
    (["--set", "recipe.stages=[sft, distill]"], "the distill stage needs a teacher"),  # nothing to distil from
])
def test_a_bad_plan_is_one_line(data, tmp_path, capsys, extra, says):
    assert _recipe(data, tmp_path / "r", *extra) == 2
    assert says in capsys.readouterr().err


def test_a_recipe_needs_its_folder_named(data, capsys):
    assert main(["recipe", "--dataset", str(data), "--preset", "gsm8k", *TINY]) == 2
    assert "output_dir=DIR" in capsys.readouterr().err


def test_a_failing_stage_is_one_line_and_the_stages_before_it_are_kept(data, tmp_path, capsys):
    out = tmp_path / "r"
    # a random tiny model passes nothing, so the rest stage has no verified sample to train on
    assert _recipe(data, out, "--set", "recipe.stages=[sft, rest]", "--set", "recipe.rest_prompts=4") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("reasoning-rl recipe: error: recipe stage 2-rest failed: UserError:") and "--resume" in err
    rec = json.loads((out / "recipe.json").read_text())
    assert [s["state"] for s in rec["stages"]] == ["done", "done", "failed"]
    assert (out / "1-sft" / "final" / "sft_done.json").is_file() and (out / "1-sft" / "eval" / "summary.json").is_file()
    assert _recipe(data, out, "--set", "recipe.stages=[sft, rest]", "--set", "recipe.rest_prompts=4") == 2
    assert "already holds a recipe" in capsys.readouterr().err  # never started over by accident
    assert _recipe(data, out, "--set", "recipe.stages=[sft, grpo]", "--resume") == 2
    assert "recipe.stages: ['sft', 'rest'] -> ['sft', 'grpo']" in capsys.readouterr().err


def test_a_stage_folder_half_written_by_a_kill_is_cleared_and_said(tmp_path):
    from reasoning_rl.recipes.record import Record
    from reasoning_rl.recipes.run import _prepare

    rec = Record.start(str(tmp_path), ["base", "sft", "grpo"], {})
    for st, state in zip(rec.stages, ("done", "done", "running")):
        st.state = state
        os.makedirs(rec.folder(st), exist_ok=True)
    (tmp_path / "2-grpo" / "metrics.jsonl").write_text('{"step": 1}\n')  # written before the first checkpoint
    said = []
    _prepare(rec, rec.stages[2], said.append)
    assert said == ["recipe: stage 2-grpo was cut short (running) before it kept a checkpoint; its half-written folder "
                    "is cleared and the stage starts again"]
    assert os.listdir(tmp_path / "2-grpo") == [] and (tmp_path / "0-base").is_dir()
    os.makedirs(tmp_path / "2-grpo" / "checkpoint")
    (tmp_path / "2-grpo" / "checkpoint" / "state.pt").write_bytes(b"x")
    rec.stages[2].state = "stopped"
    _prepare(rec, rec.stages[2], said.append)
    assert said[-1] == "recipe: stage 2-grpo goes on from what it kept (stopped before)"
    assert (tmp_path / "2-grpo" / "checkpoint" / "state.pt").is_file()


def _stopped_at(cmd: list[str], when: str) -> str:
    """Run the recipe, send it SIGTERM once a stderr line starts with `when`; its exit status must be 130 (stopped
    cleanly). Returns what it said."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=run_env(), cwd=ROOT)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.startswith(when) and p.poll() is None:
            p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=600) == 130, "".join(seen)
    return "".join(seen)


def _states(out) -> list[str]:
    return [s["state"] for s in json.loads((out / "recipe.json").read_text())["stages"]]


@pytest.mark.slow
def test_the_recipe_end_to_end_interrupted_after_its_first_stage_and_resumed(data, tmp_path):
    """Every stage runs (base, sft, grpo), writes its folder and its evaluation. A SIGTERM once the sft stage is done
    stops the recipe before the next; --resume keeps the done stages; a SIGTERM within the grpo stage stops it after
    its round with a checkpoint; --resume goes on from that round and finishes."""
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "reasoning_rl", "recipe", "--dataset", str(data), "--preset", "gsm8k", *TINY,
           "--set", "grpo.steps=4", "--set", "grpo.checkpoint_every=1", "--set", f"output_dir={out}"]
    said = _stopped_at(cmd, "recipe: stage 1-sft done")
    # the signal lands between the stages, or (delivered a moment later) in the next one, which stops at its first
    # safe point: after its first round, with a checkpoint
    between = "recipe stopped by SIGTERM before stage 2-grpo" in said
    assert between or "recipe stopped in stage 2-grpo: stopped by SIGTERM after step 1 of 4" in said, said
    assert _states(out) == ["done", "done", "pending" if between else "stopped"]
    said = _stopped_at([*cmd, "--resume"], "step 2/4")
    assert "2 of 3 stages done" in said and "== recipe stage 1-sft" not in said  # a done stage is not run again
    import re  # the signal lands in round 2 or, the rounds being short, a later one before the last

    assert re.search(r"recipe stopped in stage 2-grpo: stopped by SIGTERM after step [23] of 4", said), said
    assert _states(out) == ["done", "done", "stopped"]
    r = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=run_env(), cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "stage 2-grpo goes on from what it kept (stopped before)" in r.stderr
    rec = json.loads((out / "recipe.json").read_text())
    assert [s["state"] for s in rec["stages"]] == ["done", "done", "done"]
    for folder in ("0-base", "1-sft", "2-grpo"):
        summary = json.loads((out / folder / "eval" / "summary.json").read_text())
        assert summary["prompts"] == 4 and "greedy" in summary and "greedy_se" in summary
    assert (out / "1-sft" / "final" / "sft_done.json").is_file() and (out / "1-sft" / "difficulty.jsonl").is_file()
    metrics = [json.loads(x) for x in (out / "2-grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]  # the stopped rounds kept, the rest run once
    fmt = json.loads((out / "final" / "prompt_format.json").read_text())
    assert fmt["generation.max_tokens"] == 48 and fmt["grpo.environment"] == "calculator"
    assert (out / "final" / "config.json").is_file()
    table = (out / "summary.md").read_text()
    assert all(f"| {s} |" in table for s in ("0-base", "1-sft", "2-grpo")) and "wall time" in table
    assert "wall time of the stages" in r.stderr
