"""Two processes under `accelerate launch` (CPU, gloo) give the same GRPO loss and gradients as one
process accumulating the same whole-group micro-batches."""
import hashlib
import shutil
import subprocess
import sys
import threading
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


def _launch(args: list[str], timeout: int = 500, config: str = "ddp_cpu.yaml") -> subprocess.CompletedProcess:
    """`accelerate launch` with a shipped 2-process CPU config."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    return subprocess.run([accelerate, "launch", "--config_file", str(ROOT / "examples/accelerate" / config),
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


TINY = ["--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1", "--set", "eval.size=8",
        "--set", "generation.max_tokens=8"]
SHARDED = {  # each trainer under the FSDP2 config: its command line, and what its run leaves
    "dpo": (["train", "dpo", "--pairs", "{pairs}", "--set", "dpo.batch_size=4", "--set", "dpo.epochs=1"],
            "dpo_ours"),
    "distill": (["train", "distill", "--set", "distill.teacher=tiny", "--set", "distill.steps=2", "--set",
                 "distill.prompts_per_step=4", "--set", "distill.group_size=4", "--set", "distill.eval_every=0",
                 "--set", "distill.checkpoint_every=0", "--set", "distill.verifier_workers=1"], "final"),
    # LoRA with a KL term: the reference is the policy with its adapters off, its forwards collectives in step
    "grpo-lora": (["train", "grpo", "--set", "model.lora.r=4", "--set", "grpo.beta=0.05", "--set", "grpo.steps=2",
                   "--set", "grpo.prompts_per_step=4", "--set", "grpo.group_size=4", "--set", "grpo.eval_every=0",
                   "--set", "grpo.filter_mixed=false", "--set", "grpo.verifier_workers=1"], "final"),
    "dpo-lora": (["train", "dpo", "--pairs", "{pairs}", "--set", "model.lora.r=4", "--set", "dpo.batch_size=4",
                  "--set", "dpo.epochs=1"], "dpo_ours"),
    "ppo-lora": (["train", "ppo", "--set", "model.lora.r=4", "--set", "ppo.beta=0.05", "--set", "ppo.steps=2",
                  "--set", "ppo.prompts_per_step=4", "--set", "ppo.group_size=4", "--set", "ppo.eval_every=0",
                  "--set", "ppo.filter_mixed=false", "--set", "ppo.verifier_workers=1"], "final"),
}


@pytest.mark.slow  # two processes through a whole trainer, each
@pytest.mark.timeout(600)
@pytest.mark.parametrize("trainer", sorted(SHARDED))
def test_each_trainer_runs_sharded_under_the_fsdp2_config(tmp_path, trainer):
    """DPO, distillation, and GRPO, DPO and PPO with LoRA and a reference (the policy with its adapters off) run
    under `accelerate launch` with the FSDP2 config: they finish, say they are sharded, and write a final model a
    single process loads."""
    import json

    pairs = tmp_path / "pairs.jsonl"  # the untrained tiny model samples no mixed group: pairs given
    pairs.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)})
                             + "\n" for a in range(10, 14) for b in range(3, 7)))
    args, final = SHARDED[trainer]
    args = [x.replace("{pairs}", str(pairs)) for x in args]
    out = tmp_path / "run"
    r = _launch([*args, "--set", f"output_dir={out}", *TINY], config="fsdp2_cpu.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FSDP2" in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
    lora = trainer.endswith("-lora")
    folder = next(p for p in out.rglob("config.json") if final in p.parts or p.parent.name == final).parent \
        if trainer not in ("grpo-lora", "ppo-lora") else out / "final"
    assert folder.is_dir() and any(folder.rglob("*.safetensors"))
    if lora:  # adapters alone, a PEFT folder: the tiny model's base is built in code, so merged
        assert (folder / "adapter").is_dir() or (folder / "adapter_config.json").is_file(), sorted(folder.rglob("*"))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(module_args: list[str], env: dict, timeout: int = 500) -> list[subprocess.CompletedProcess]:
    """Two `torchrun` launchers as two nodes of one process each, meeting at a loopback rendezvous (c10d), as two
    machines would over their network; returns both launchers' results."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    port, rid = _free_port(), f"rrl-{_free_port()}"
    procs = [subprocess.Popen([torchrun, "--nnodes", "2", "--node-rank", str(r), "--nproc-per-node", "1",
                               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", rid,
                               *module_args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out


FSDP_ENV = {"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2"}


@pytest.mark.slow  # two torchrun launchers, then two single processes: about half a minute
@pytest.mark.timeout(600)
def test_fsdp2_over_two_nodes_equals_one_process(tmp_path):
    """FSDP2 over two nodes on one machine (two torchrun launchers, a loopback rendezvous, gloo): each rank holds
    half of every parameter, the ranks' micro-batch counts differ (rank 1 adds a zero-loss pass), and the gradient
    gathered from the shards equals one process running both ranks' micro-batches, to float tolerance."""
    two, one, whole = tmp_path / "two.pt", tmp_path / "one.pt", tmp_path / "whole.pt"
    runs = two_nodes(["-m", "tests.helpers.fsdp_update", str(two)], run_env(OMP_NUM_THREADS="1", **FSDP_ENV))
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-3000:] + runs[1].stderr[-3000:]
    for args, out in ((["--one-process"], one), (["--one-batch"], whole)):
        subprocess.run([sys.executable, "-m", "tests.helpers.fsdp_update", str(out), *args], cwd=ROOT,
                       env=run_env(OMP_NUM_THREADS="1"), check=True, capture_output=True, timeout=300)
    a, b, c = torch.load(two), torch.load(one), torch.load(whole)
    assert a["world"] == 2 and b["world"] == 1 and a["extra_passes"] == [0, 1]
    assert sum(a["held"]) == a["whole"] and max(a["held"]) <= a["whole"] // 2 + 256  # each rank: about half
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    assert a["grads"].keys() == b["grads"].keys() and a["grads"]
    for k in a["grads"]:
        torch.testing.assert_close(a["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5)
    assert any(not torch.allclose(c["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5) for k in b["grads"])
    # the launcher's activation checkpointing (fsdp_activation_checkpointing): recomputed, the same gradient
    ac = tmp_path / "two_ac.pt"
    runs = two_nodes(["-m", "tests.helpers.fsdp_update", str(ac)],
                     run_env(OMP_NUM_THREADS="1", FSDP_ACTIVATION_CHECKPOINTING="true", **FSDP_ENV))
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-3000:]
    d = torch.load(ac)
    for k in b["grads"]:
        torch.testing.assert_close(d["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5)


@pytest.mark.slow  # two torchrun launchers, then one process: about 20 s
@pytest.mark.timeout(600)
def test_fsdp2_lora_with_its_reference_equals_one_process(tmp_path):
    """LoRA with a KL term under FSDP2 over two nodes: the reference is the sharded policy with its adapters off, so
    its forward is a collective; rank 1's zero-loss pass runs it too, and the adapters' gradient gathered from the
    shards equals one process's (the KL term moves it: the adapters are random, not zero)."""
    two, one, plain = tmp_path / "two.pt", tmp_path / "one.pt", tmp_path / "plain.pt"
    runs = two_nodes(["-m", "tests.helpers.fsdp_update", str(two), "--lora", "--kl"],
                     run_env(OMP_NUM_THREADS="1", **FSDP_ENV))
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-3000:] + runs[1].stderr[-3000:]
    for args, out in ((["--one-process", "--lora", "--kl"], one), (["--one-process", "--lora"], plain)):
        subprocess.run([sys.executable, "-m", "tests.helpers.fsdp_update", str(out), *args], cwd=ROOT,
                       env=run_env(OMP_NUM_THREADS="1"), check=True, capture_output=True, timeout=300)
    a, b = torch.load(two), torch.load(one)
    assert a["extra_passes"] == [0, 1] and a["grads"].keys() == b["grads"].keys()
    assert a["grads"] and all("lora_" in k for k in a["grads"])  # only the adapters train
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    for k in a["grads"]:
        torch.testing.assert_close(a["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5)
    c = torch.load(plain)  # the same adapters without the KL term: another loss and gradient
    assert a["loss"] != pytest.approx(c["loss"], abs=1e-5)
    assert any(not torch.allclose(c["grads"][k], b["grads"][k], atol=1e-7, rtol=1e-5) for k in b["grads"])


def _small(algo: str) -> list[str]:
    """A few steps of `algo` (grpo or ppo) on the one-layer tiny model, a checkpoint each step."""
    knobs = {"prompts_per_step": 4, "group_size": 4, "filter_mixed": "false", "sampler": "uniform", "eval_every": 0,
             "eval_at_start": "false", "eval_at_end": "false", "checkpoint_every": 1, "verifier_workers": 1,
             "train_prompts": 64, "lr": 3e-3}
    return ["--set", "model.tiny.num_layers=1", "--set", "generation.max_tokens=8",
            *[x for k, v in knobs.items() for x in ("--set", f"{algo}.{k}={v}")]]


GRPO_SMALL = _small("grpo")


def _fsdp_run(out, steps: int, *extra: str, resume: bool = False, algo: str = "grpo") -> subprocess.CompletedProcess:
    """GRPO (or PPO) under `accelerate launch` with the shipped FSDP2 CPU config (two processes)."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    args = [accelerate, "launch", "--config_file", str(ROOT / "examples/accelerate/fsdp2_cpu.yaml"), "-m",
            "reasoning_rl", "train", algo, "--set", f"output_dir={out}", "--set", f"{algo}.steps={steps}",
            *_small(algo), *extra, *(["--resume"] if resume else [])]
    return subprocess.run(args, cwd=ROOT, env=run_env(OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=500)


def _one_run(out, steps: int, *extra: str, resume: bool = False, algo: str = "grpo") -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "reasoning_rl", "train", algo, "--set", f"output_dir={out}", "--set",
            f"{algo}.steps={steps}", *_small(algo), *extra, *(["--resume"] if resume else [])]
    return subprocess.run(args, cwd=ROOT, env=run_env(OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=500)


def _metrics(out) -> list[dict]:
    import json

    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def _final_weights(out) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "final" / "model.safetensors"))


PPO_SHARDED = ("--set", "ppo.minibatch_size=4", "--set", "ppo.micro_batch_size=3", "--set", "ppo.beta=0.05",
               "--set", "ppo.adaptive_kl=true")  # micro-batches that do not divide, a KL term and its controller


@pytest.mark.slow  # three two-process runs of the whole trainer: about two minutes each
@pytest.mark.timeout(900)
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_fsdp2_resumes_under_the_launcher_on_the_same_trajectory(tmp_path, algo):
    """GRPO, and PPO with its critic sharded like the policy, with FSDP2 over two processes: 3 steps straight equal
    2 steps, then `--resume` (extended to 3) under the same launcher, step for step (rewards, losses, the critic's
    loss and values) and in the final weights; the checkpoint is a torch.distributed.checkpoint folder with one random
    state per rank, the critic and its optimiser among its shards."""
    extra = PPO_SHARDED if algo == "ppo" else ()
    a, b = tmp_path / "straight", tmp_path / "resumed"
    r = _fsdp_run(a, 3, *extra, algo=algo)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FSDP2 over 2 processes" in r.stdout
    r = _fsdp_run(b, 2, *extra, algo=algo)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {p.name for p in (b / "checkpoint").iterdir()} >= {"dcp", "rank0.pt", "rank1.pt", "state.pt"}
    if algo == "ppo":  # the critic's weights and moments are shards in dcp/, not rank 0's part in state.pt
        from torch.distributed.checkpoint import FileSystemReader

        saved = FileSystemReader(str(b / "checkpoint" / "dcp")).read_metadata().state_dict_metadata
        assert any(k.startswith("critic.body.") for k in saved) and any(k.startswith("critic_optim.") for k in saved)
        assert "critic" not in torch.load(b / "checkpoint" / "state.pt", weights_only=False)["extra"]
    r = _fsdp_run(b, 3, *extra, algo=algo, resume=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stdout and "resharded" not in r.stdout  # the same world: no departure
    ma, mb = _metrics(a), _metrics(b)
    assert [m["step"] for m in mb] == [1, 2, 3]
    keys = ("reward/mean", "loss/policy", "train/samples") + (("loss/value", "kl", "kl_coef") if algo == "ppo" else ())
    for x, y in zip(ma, mb):
        for k in keys:
            assert k in x, (k, sorted(x))
            assert x.get(k) == pytest.approx(y.get(k), abs=1e-6), (x["step"], k)
    wa, wb = _final_weights(a), _final_weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=1e-6, rtol=1e-5)


@pytest.mark.slow  # a two-process run, a one-process resume, a one-process run and a two-process resume
@pytest.mark.timeout(900)
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_checkpoint_resumes_with_another_world_size_and_says_so(tmp_path, algo):
    """2 ranks -> 1 process and 1 process -> 2 ranks (FSDP2): the weights and optimiser state (PPO: the critic's
    too) reshard as they load, the run continues to its end and writes a plain final/ folder, and the log says the
    trajectory departs."""
    extra = PPO_SHARDED if algo == "ppo" else ()
    for name, first, then, said in (("two", _fsdp_run, _one_run, ("written by 2 process(es) with 1", "resharded")),
                                    ("one", _one_run, _fsdp_run, ("written by 1 process(es) with 2",
                                                                  "start from the run's seed"))):
        out = tmp_path / name
        assert first(out, 2, *extra, algo=algo).returncode == 0
        r = then(out, 3, *extra, algo=algo, resume=True)
        assert r.returncode == 0, r.stderr[-3000:]
        assert all(line in r.stdout for line in said), r.stdout[-2000:]
        assert [m["step"] for m in _metrics(out)] == [1, 2, 3] and (out / "final" / "model.safetensors").exists()


def test_the_what_fits_where_table_is_the_formula():
    """docs/scale-out.md's table of per-rank training state equals `sharding.state_bytes` for every cell."""
    from reasoning_rl.trainers.sharding import state_bytes

    text = (ROOT / "docs" / "scale-out.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "GiB" in line]
    assert len(rows) == 4
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        p = int(float(cells[1].split()[0].replace(",", "")) * 1e6)  # "134.5 M"
        want = [state_bytes(p), state_bytes(p, 2, True), state_bytes(p, 8, True),
                state_bytes(p, trained=int(p * 0.005)), state_bytes(p, 8, True, trained=int(p * 0.005))]
        got = [float(c.split()[0]) for c in cells[2:]]
        assert got == pytest.approx([w / 2**30 for w in want], abs=0.06), cells[0]
    # the sharded state is 1/world of the whole, to a byte per rank
    assert state_bytes(1000, 3, True) == -(-16000 // 3) and state_bytes(1000) == 16000


@pytest.mark.timeout(300)
def test_a_launched_rank_destroys_its_process_group_before_the_interpreter_ends():
    """Each rank's gloo group is destroyed by an exit hook while the interpreter is whole: left alive, its threads
    are torn down with the interpreter and, now and then, abort a finished rank (SIGABRT, "terminate called
    without an active exception"), which fails the launch. Three CI runs of the FSDP2 tests ended so."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    r = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", "-m", "tests.helpers.ranks_exit"],
                       cwd=ROOT, env=run_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank} of 2 gathered [0, 1]" in r.stdout, r.stdout
        assert f"rank {rank} group alive at exit: False" in r.stdout, r.stdout


def test_the_exit_hooks_wait_sees_a_running_thread_and_returns_once_it_sleeps():
    """`let_threads_settle`, the wait `release_process_group` makes for gloo's worker threads at exit: while another
    thread of the process runs (hashing, the GIL free, as a gloo worker runs its collective) it does not call the
    process quiet; once that thread has ended it does."""
    from reasoning_rl.trainers.distributed import let_threads_settle

    stop = threading.Event()

    def busy() -> None:
        block = bytes(32 << 20)
        while not stop.is_set():
            hashlib.sha256(block).digest()  # releases the GIL: this thread is running, not waiting

    t = threading.Thread(target=busy)
    t.start()
    try:
        assert let_threads_settle(quiet_s=0.05, limit_s=0.5) is False
    finally:
        stop.set()
        t.join()
    assert let_threads_settle(quiet_s=0.05, limit_s=30) is True
