"""Every trainer under every combination a user can configure, one round each on a real transformer.

The combinations: the RL trainers (GRPO, PPO, on-policy distillation) under full fine-tuning or LoRA, beta 0 or
beta > 0 (a KL term to the reference: a frozen copy, or the base with the adapters off), sync rounds or async ones
(a worker engine one round behind), single completions or episodes with the calculator; DPO (ours, TRL's) and SFT on
verified samples under full fine-tuning or LoRA. Each runs one round on the tiny model built in code; the path users
take on a real model (LoRA with a KL term) runs on SmolLM2-135M too. A combination the toolkit does not support is
refused in one line by the config, before anything loads. docs/training.md's matrix is this file's table; a test
keeps them equal.
"""
import itertools
import re
from pathlib import Path

import pytest

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.errors import UserError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RL = ("grpo", "ppo", "distill")
# one short round of the tiny model: a length term beside the outcome so that an untrained start's groups vary
SHORT = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "eval.size=4", "generation.max_tokens=8",
         "tasks.reward=[{verifier: math, weight: 1.0}, "
         "{verifier: soft_length, weight: 1.0, options: {max_length: 8, cache_length: 7}}]"]
# the tiny model from its SFT warm start (cached; built on first use), which passes some of its samples
WARM = ["eval.size=4", "generation.max_tokens=8"]
# what the config refuses, and the words of its one line
ASYNC_EPISODES = "runs its episodes on engine hf, vllm or openai"


def rl_overrides(algo: str, lora: bool, beta: float, rounds: str, env: str) -> list[str]:
    o = [f"model.lora.r={4 if lora else 0}", f"{algo}.beta={beta}", f"{algo}.steps=1", f"{algo}.prompts_per_step=2",
         f"{algo}.group_size=4", f"{algo}.eval_every=0", f"{algo}.checkpoint_every=0", f"{algo}.verifier_workers=1",
         f"{algo}.train_prompts=8", f"{algo}.environment={env}"]
    if algo != "distill":
        o.append(f"{algo}.filter_mixed=false")
    else:
        o.append("distill.teacher=tiny")
    if rounds == "async":
        o += [f"{algo}.engine=worker", f"{algo}.max_staleness=1"]
    if env:
        o.append(f"{algo}.max_tool_calls=1")
    return o


def refusal(algo: str, lora: bool, beta: float, rounds: str, env: str) -> str | None:
    """The table's answer for an RL combination: None = runs, else what its one line says."""
    return ASYNC_EPISODES if rounds == "async" and env else None


RL_CASES = list(itertools.product(RL, (False, True), (0.0, 0.05), ("sync", "async"), ("", "calculator")))


def _id(c) -> str:
    algo, lora, beta, rounds, env = c
    return f"{algo}-{'lora' if lora else 'full'}-beta{beta:g}-{rounds}-{env or 'completions'}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", RL_CASES, ids=[_id(c) for c in RL_CASES])
def test_each_rl_combination_runs_one_round_or_is_refused_in_one_line(tmp_path, case):
    from reasoning_rl.rollout.engines import check_sampling
    from reasoning_rl.trainers.distill import train_distill
    from reasoning_rl.trainers.grpo import train_grpo
    from reasoning_rl.trainers.ppo import train_ppo

    algo, lora, beta, rounds, env = case
    overrides = SHORT + rl_overrides(*case) + [f"output_dir={tmp_path}"]
    refused = refusal(*case)
    if refused:
        with pytest.raises(UserError) as e:
            config.load(Config, overrides=overrides)
        assert refused in str(e.value) and "\n" not in str(e.value)
        return
    cfg = config.load(Config, overrides=overrides)
    check_sampling(cfg, getattr(cfg, algo), algo)
    history, model, _ = {"grpo": train_grpo, "ppo": train_ppo, "distill": train_distill}[algo](cfg, log=lambda *_: 0)
    trained = [h for h in history if h.get("train/samples")]
    assert trained, history  # the round trained on something
    if beta > 0:
        assert all("kl" in h for h in trained)
    if lora:
        assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    if env:
        assert all("tools/calls_per_sample" in h for h in trained)
    assert (tmp_path / "final").is_dir()


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """Verified samples of the tiny model from its SFT warm start (`curate`; the untrained start passes nothing), the
    file SFT on verified samples trains on."""
    from .conftest import PY, run_env
    import subprocess

    out = tmp_path_factory.mktemp("curated")
    r = subprocess.run([PY, "-m", "reasoning_rl", "curate", "-n", "4", "--limit", "16", "--output", str(out),
                        *[x for o in WARM for x in ("--set", o)]], capture_output=True, text=True, env=run_env(),
                       timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "samples.jsonl"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("backend", ["ours", "trl"])
def test_dpo_runs_under_each_backend_full_and_lora(tmp_path, lora, backend):
    from reasoning_rl.trainers.dpo import train_dpo

    rows = [{"prompt": f"{a}+{a}=", "chosen": str(2 * a), "rejected": str(2 * a + 1)} for a in range(8)]
    cfg = config.load(Config, overrides=SHORT + [f"model.lora.r={4 if lora else 0}", "dpo.batch_size=4",
                                                 "dpo.epochs=1", f"output_dir={tmp_path}"])
    out = train_dpo(cfg, pairs=rows, backend=backend, log=lambda *_: 0)
    assert out.backend == backend and out.pairs == len(rows) and "rewards/margins" in out.metrics
    if lora:
        assert all("lora_" in n for n, p in out.model.named_parameters() if p.requires_grad)


def test_dpo_with_beta_zero_is_refused_in_one_line():
    with pytest.raises(UserError, match=r"dpo.beta: value 0 .* nothing trains"):
        config.load(Config, overrides=["dpo.beta=0"])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_sft_on_verified_samples_full_and_lora(tmp_path, verified, lora):
    import subprocess

    from .conftest import PY, run_env

    r = subprocess.run([PY, "-m", "reasoning_rl", "sft", "--samples", str(verified), "--output", str(tmp_path / "s"),
                        "--steps", "2", *[x for o in WARM + [f"model.lora.r={4 if lora else 0}"]
                                          for x in ("--set", o)]],
                       capture_output=True, text=True, env=run_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path / "s"
    assert (out / "sft_done.json").is_file() and "held-out accuracy" in r.stdout
    # full: the whole model; LoRA: the adapters alone, naming the warm start's folder they load into
    assert (out / "adapter_config.json").is_file() == lora and (out / "model.safetensors").is_file() != lora


# ------------------------------------------------------------------ the real model: the path users take
REAL = ["model.name_or_path=smollm2-135m-instruct", "generation.max_tokens=8", "eval.size=2",
        "tasks.families=[word_add]", "tasks.max_digits=1"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("algo", RL)
def test_the_real_model_trains_a_round_with_lora_and_a_kl_term(tmp_path, algo):
    from reasoning_rl.trainers.distill import train_distill
    from reasoning_rl.trainers.grpo import train_grpo
    from reasoning_rl.trainers.ppo import train_ppo

    o = [x for x in rl_overrides(algo, True, 0.05, "sync", "") if not x.startswith("distill.teacher")]
    o = [x.replace("prompts_per_step=2", "prompts_per_step=1") for x in o]
    if algo == "distill":
        o.append("distill.teacher=smollm2-135m-instruct")
    cfg = config.load(Config, overrides=REAL + o + [f"output_dir={tmp_path}"])
    history, model, _ = {"grpo": train_grpo, "ppo": train_ppo, "distill": train_distill}[algo](cfg, log=lambda *_: 0)
    trained = [h for h in history if h.get("train/samples")]
    assert trained and all("kl" in h for h in trained)
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)


# ------------------------------------------------------------------ the docs' table is this file's
def test_the_docs_matrix_is_the_tested_one():
    text = (ROOT / "docs" / "training.md").read_text()
    table = text[text.index("## Every trainer, every combination"):]
    rows = {tuple(c.strip() for c in line.strip("|").split("|")) for line in table.splitlines()
            if re.match(r"\| (grpo|ppo|distill) ", line)}
    expected = set()
    for algo, rounds, env in itertools.product(RL, ("sync", "async"), ("completions", "calculator")):
        status = "refused: " + ASYNC_EPISODES if refusal(algo, False, 0.0, rounds, env if env != "completions"
                                                         else "") else "runs"
        expected.add((algo, rounds, env, "full, LoRA", "0, > 0", status))
    assert rows == expected
