"""Two processes under `accelerate launch` (CPU, gloo) give the same GRPO loss and gradients as one
process accumulating the same whole-group micro-batches."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .helpers.ddp_update import shard_groups, synthetic_batch

from .conftest import run_env

ROOT = Path(__file__).resolve().parents[1]


def test_shards_are_whole_groups_and_cover_the_batch():
    groups = synthetic_batch(num_groups=7)
    shards = [shard_groups(groups, r, 3) for r in range(3)]
    assert sorted(id(g) for s in shards for g in s) == sorted(id(g) for g in groups)
    with pytest.raises(ValueError):
        shard_groups(groups, 3, 3)


@pytest.mark.slow  # accelerate launches two processes, then two more runs: over half a minute
@pytest.mark.timeout(600)
def test_two_ranks_equal_one_process_with_accumulation(tmp_path):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    assert accelerate, "accelerate's launcher is part of the dev environment"
    env = run_env(OMP_NUM_THREADS="1")
    two, one, whole = tmp_path / "two.pt", tmp_path / "one.pt", tmp_path / "whole.pt"
    # --multi_gpu selects accelerate's torchrun launcher; Accelerator(cpu=True) then runs DDP over gloo on the CPU
    subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                    "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "tests.helpers.ddp_update",
                    str(two)], cwd=ROOT, env=env, check=True, capture_output=True, timeout=500)
    subprocess.run([sys.executable, "-m", "tests.helpers.ddp_update", str(one), "--accumulation", "2"],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    subprocess.run([sys.executable, "-m", "tests.helpers.ddp_update", str(whole)],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    a, b, c = torch.load(two), torch.load(one), torch.load(whole)
    assert a["world"] == 2 and b["world"] == 1
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    assert a["grads"].keys() == b["grads"].keys() and a["grads"]
    for k in a["grads"]:
        torch.testing.assert_close(a["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5)
    # sensitivity: one micro-batch of all 8 groups (a token mean over all of them) is a different gradient
    assert any(not torch.allclose(c["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5) for k in b["grads"])


@pytest.mark.slow  # two processes through the whole trainer: the fast suite keeps the gradient check above
@pytest.mark.timeout(600)
def test_train_grpo_under_accelerate_launch_gathers_both_ranks_and_rank0_alone_writes(tmp_path):
    """The whole GRPO trainer, 2 processes: each rank samples half the prompts of a step; the metrics,
    archive, ledger and final model are written once, by rank 0, from both ranks' groups."""
    import json
    import sqlite3

    out = tmp_path / "run"
    r = _launch(["train", "grpo", "--set", f"output_dir={out}", "--set", "model.sft_warm_start=false",
                 "--set", "model.tiny.num_layers=1", "--set", "grpo.steps=2", "--set", "grpo.prompts_per_step=6",
                 "--set", "grpo.group_size=4", "--set", "grpo.filter_mixed=false", "--set", "grpo.sampler=uniform",
                 "--set", "grpo.eval_every=2", "--set", "eval.size=10", "--set", "grpo.checkpoint_every=1",
                 "--set", "grpo.verifier_workers=1", "--set", "grpo.train_prompts=64"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("done: 2 steps") == 1  # rank 1 reports nothing
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2]  # one writer
    archive = [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]
    for step in (1, 2):
        rows = [a for a in archive if a["step"] == step]
        assert len(rows) == 6 * 4  # 3 groups of 4 from each rank
        assert len({a["prompt_id"] for a in rows}) >= 4  # two ranks drew their prompts independently
    with sqlite3.connect(out / "ledger.sqlite") as con:
        (attempts,) = con.execute("SELECT SUM(attempts) FROM prompts").fetchone()
    assert attempts == 2 * 6 * 4
    assert (out / "final" / "config.json").exists() and (out / "checkpoint").exists()


def _launch(args: list[str], timeout: int = 500) -> subprocess.CompletedProcess:
    """`accelerate launch` with the shipped 2-process CPU config."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    return subprocess.run([accelerate, "launch", "--config_file", str(ROOT / "examples/accelerate/ddp_cpu.yaml"),
                           "-m", "reasoning_rl", *args],
                          cwd=ROOT, env=run_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # two processes through the whole trainer: the fast suite keeps the gradient check above
@pytest.mark.timeout(600)
def test_train_ppo_under_accelerate_launch(tmp_path):
    """PPO, 2 processes, micro-batches that do not divide the minibatch (DDP all-reduces on each minibatch's
    last micro-batch only): both ranks stay in step; rank 0 alone writes, from both ranks' samples."""
    import json

    out = tmp_path / "run"
    r = _launch(["train", "ppo", "--set", f"output_dir={out}", "--set", "model.tiny.num_layers=1",
                 "--set", "model.sft_warm_start=false", "--set", "ppo.steps=2", "--set", "ppo.prompts_per_step=8",
                 "--set", "ppo.minibatch_size=4", "--set", "ppo.micro_batch_size=3", "--set", "ppo.eval_every=2",
                 "--set", "eval.size=10", "--set", "ppo.verifier_workers=1", "--set", "ppo.adaptive_kl=true"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("done: 2 steps") == 1
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]
    archive = [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]
    assert len(archive) == 2 * 8 * 2  # steps x prompts (4 per rank) x samples
    assert (out / "final" / "config.json").exists()


@pytest.mark.slow  # two processes through the whole trainer: the fast suite keeps the gradient check above
@pytest.mark.timeout(600)
def test_train_dpo_under_accelerate_launch(tmp_path):
    """DPO (ours), 2 processes: each rank samples half the prompts, the pairs are gathered so both ranks
    train on the same pairs; rank 0 alone reports and saves (and alone builds the SFT checkpoint)."""
    r = _launch(["train", "dpo", "--set", f"output_dir={tmp_path}", "--set", "dpo.sample_prompts=40",
                 "--set", "sft.steps=300", "--set", "eval.size=10",  # the SFT settings test_resume.py uses
                 "--set", "eval.size=20", "--set", "dpo.batch_size=8"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "from 2 ranks" in r.stdout and r.stdout.count("dpo (ours, ") == 1
    assert (tmp_path / "dpo_ours" / "config.json").exists()
