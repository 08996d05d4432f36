"""Two processes under `accelerate launch` (CPU, gloo) give the same GRPO loss and gradients as one
process accumulating the same whole-group micro-batches."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reasoning_rl.trainers.distributed import shard_groups, synthetic_batch

from .conftest import run_env

ROOT = Path(__file__).resolve().parents[1]


def test_shards_are_whole_groups_and_cover_the_batch():
    groups = synthetic_batch(num_groups=7)
    shards = [shard_groups(groups, r, 3) for r in range(3)]
    assert sorted(id(g) for s in shards for g in s) == sorted(id(g) for g in groups)
    with pytest.raises(ValueError):
        shard_groups(groups, 3, 3)


@pytest.mark.timeout(600)
def test_two_ranks_equal_one_process_with_accumulation(tmp_path):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    assert accelerate, "accelerate's launcher is part of the dev environment"
    env = run_env(OMP_NUM_THREADS="1")
    two, one, whole = tmp_path / "two.pt", tmp_path / "one.pt", tmp_path / "whole.pt"
    # --multi_gpu selects accelerate's torchrun launcher; Accelerator(cpu=True) then runs DDP over gloo on the CPU
    subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                    "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "reasoning_rl.trainers.distributed",
                    str(two)], cwd=ROOT, env=env, check=True, capture_output=True, timeout=500)
    subprocess.run([sys.executable, "-m", "reasoning_rl.trainers.distributed", str(one), "--accumulation", "2"],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    subprocess.run([sys.executable, "-m", "reasoning_rl.trainers.distributed", str(whole)],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    a, b, c = torch.load(two), torch.load(one), torch.load(whole)
    assert a["world"] == 2 and b["world"] == 1
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    assert a["grads"].keys() == b["grads"].keys() and a["grads"]
    for k in a["grads"]:
        torch.testing.assert_close(a["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5)
    # sensitivity: one micro-batch of all 8 groups (a token mean over all of them) is a different gradient
    assert any(not torch.allclose(c["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5) for k in b["grads"])


@pytest.mark.timeout(600)
def test_train_grpo_under_accelerate_launch_gathers_both_ranks_and_rank0_alone_writes(tmp_path):
    """The whole GRPO trainer, 2 processes: each rank samples half the prompts of a step; the metrics,
    archive, ledger and final model are written once, by rank 0, from both ranks' groups."""
    import json
    import sqlite3

    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    out = tmp_path / "run"
    r = subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                        "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "reasoning_rl", "train", "grpo",
                        "--set", f"output_dir={out}", "--set", "model.sft_warm_start=false",
                        "--set", "model.tiny.num_layers=1", "--set", "grpo.steps=2", "--set", "grpo.prompts_per_step=6",
                        "--set", "grpo.group_size=4", "--set", "grpo.filter_mixed=false", "--set", "grpo.sampler=uniform",
                        "--set", "grpo.eval_every=2", "--set", "grpo.eval_size=10", "--set", "grpo.checkpoint_every=1",
                        "--set", "grpo.verifier_workers=1", "--set", "grpo.train_prompts=64"],
                       cwd=ROOT, env=run_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=500)
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
