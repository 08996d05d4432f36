"""GRPO with a Python tool: ours (`grpo.environment=python`) against TRL's `GRPOTrainer(tools=[python])`, one run.

    .venv/bin/python bench/tools_vs_trl.py [--steps 5] [--prompts 4] [--group 4] [--max-tokens 64] [--turns 2] \\
        [--cold-start 40]

With `--cold-start N` both start from the model cold-started on N SFT steps of tool traces written in the template's
call form (`reasoning-rl traces --tool-format chat`), so both runs make tool calls and the step time holds their cost.

The same model (SmolLM2-135M-Instruct, every core for each), whose chat template is set to the Qwen3 template TRL
ships (TRL accepts tools only with a template it can parse tool calls from; ours reads the same `<tool_call>` JSON),
the same prompts (word problems, task/embedded/word_problems.py, with an instruction naming the tool), the same
reward (the `math` verifier), group size, prompts per step, learning rate, loss (`dapo`, clip 0.2 / 0.28, beta 0, one
iteration), tool-call limit and one pass of the batch (`grpo.length_buckets=1`; TRL: no accumulation), neither
recomputing activations in the backward pass (TRL's default does: --trl-checkpointing). The tool runs on our sandbox
in both (for TRL, a function that runs the code in a fresh sandboxed interpreter). Both render the tool's schema into
the prompt through the template. Limits per turn: TRL's `max_completion_length` and our `generation.max_tokens` are
`--max-tokens`; ours also bounds the whole episode (`grpo.max_episode_tokens`, `--max-tokens` x (turns + 1)).

Printed: seconds per step (median over the steps after the first), their ratio, the reward of every step, and the
tool calls each made (ours: tools/calls_per_sample; TRL: tools/call_frequency). Not here: a claim about learning (a
few steps, one seed); the tool traces either writes.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from grpo_vs_trl import WORD, add_trl_checkpointing, math_reward_for, step_clock, trl_args  # noqa: E402  shared

INSTRUCTION = "You can run Python with the python tool. Put the final answer in \\boxed{}."


def model_with_qwen3_template(out: str) -> str:
    """The converted SmolLM2 folder copied to `out`, its chat template replaced by the Qwen3 one TRL ships."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    from reasoning_rl.models import sources as model_sources

    shutil.copytree(model_sources.resolve("smollm2-135m-instruct", log=lambda *_: None), out)
    tok = AutoTokenizer.from_pretrained(out)
    tok.chat_template = qwen3_chat_template
    tok.save_pretrained(out)
    return out


def cold_start(model: str, steps: int, out: str, threads: int) -> str:
    """`model` cold-started on tool traces in its template's call form (`reasoning-rl traces --tool-format chat`,
    the bench's instruction, then `sft --samples`: batches of 8, lr 2e-4), so that both trainers start from a model
    that calls the tool; returns the new model's folder (its tokenizer keeps the template)."""
    import json
    import subprocess

    from reasoning_rl.task.embedded.tool_problems import problems

    traces, cold, held = os.path.join(out, "traces"), os.path.join(out, "cold"), os.path.join(out, "held.jsonl")
    with open(held, "w") as f:  # sft evaluates a few rows at its end: problems of the same families
        f.writelines(json.dumps({"prompt": p.prompt, "answer": str(p.answer)}) + "\n" for p in problems(8, 11, 2))
    for args in (["traces", "-n", str(max(64, 8 * steps)), "--tool-format", "chat", "--instruction", INSTRUCTION,
                  "-o", traces],
                 ["sft", "--samples", os.path.join(traces, "samples.jsonl"), "--steps", str(steps), "--output", cold,
                  "--dataset", held, "--set", f"tasks.test_split={held}", "--set", "eval.size=4", "--set",
                  "sft.batch_size=8", "--set", "sft.lr=2e-4", "--set", "sft.warmup_steps=5"]):
        r = subprocess.run([sys.executable, "-m", "reasoning_rl", *args, "--set", f"model.name_or_path={model}",
                            "--set", f"num_threads={threads}"],  # every core: this process waits meanwhile
                           cwd=os.path.dirname(HERE), capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"cold start: {args[0]} failed:\n{r.stderr[-2000:]}")
    return cold


def sandboxed_python():
    """TRL's tool: a plain function (its docstring is the schema TRL shows the model) running on our sandbox."""
    from reasoning_rl.rollout.environments import PythonTool

    env = PythonTool()
    calls = []

    def python(code: str) -> str:
        """Run Python code in a sandboxed interpreter; returns what it prints and the value of its last expression.

        Args:
            code: the code
        """
        calls.append(code)
        block = f"```python\n{code}\n```"
        return env.respond([env.start({"prompt_id": str(len(calls))})], [block])[0].observation

    return python, calls, env


def run_trl(model: str, rows: list[dict], a, out: str) -> tuple[list[float], list[float], list[float]]:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import add_response_schema

    times, clock = step_clock()
    tok = add_response_schema(AutoTokenizer.from_pretrained(model))
    python, _, env = sandboxed_python()
    args = trl_args(a, out, max_tool_calling_iterations=a.turns)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{r['prompt']}\n{INSTRUCTION}"}],
                             "answer": r["answer"]} for r in rows])
    try:
        trainer = GRPOTrainer(model=model, reward_funcs=math_reward_for(tok), args=args, train_dataset=ds,
                              processing_class=tok, tools=[python], callbacks=[clock])
        trainer.train()
    finally:
        env.shutdown()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return times, [h["reward"] for h in logs], [h.get("tools/call_frequency", 0.0) for h in logs]


def run_ours(model: str, a, out: str) -> tuple[list[float], list[float], list[float]]:
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=[
        *WORD, f"tasks.instruction={INSTRUCTION}", f"num_threads={a.threads}", f"output_dir={out}",
        f"model.name_or_path={model}", f"seed={a.seed}", f"grpo.steps={a.steps}", f"grpo.prompts_per_step={a.prompts}",
        f"grpo.group_size={a.group}", f"generation.max_tokens={a.max_tokens}", f"grpo.lr={a.lr}",
        "grpo.warmup_steps=0", "grpo.loss_type=dapo", "grpo.beta=0", "grpo.num_iterations=1",
        f"grpo.minibatch_size={a.prompts * a.group}", "grpo.length_buckets=1",  # one pass of the batch, as TRL's
        "grpo.filter_mixed=false", "grpo.sampler=uniform",
        f"grpo.eval_every={a.steps + 1}", "eval.size=1", "grpo.checkpoint_every=0", "grpo.verifier_workers=1",
        "grpo.environment=python", "grpo.tool_format=chat", f"grpo.max_tool_calls={a.turns}",
        f"grpo.max_turns={a.turns + 1}", f"grpo.max_episode_tokens={a.max_tokens * (a.turns + 1)}"])
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    share = [h.get("time/tools", 0.0) / h["time/step"] for h in history]
    print("ours: tool seconds (summed over calls, which overlap) over each step's seconds: "
          + ", ".join(f"{x:.2f}" for x in share), flush=True)
    return ([h["time/step"] for h in history], [h["reward/mean"] for h in history],
            [h["tools/calls_per_sample"] for h in history])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step (B)")
    ap.add_argument("--group", type=int, default=4, help="samples per prompt (G)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per model turn")
    ap.add_argument("--turns", type=int, default=2, help="tool calls per sample (TRL max_tool_calling_iterations)")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads of each (0 = every core)")
    add_trl_checkpointing(ap)
    ap.add_argument("--cold-start", type=int, default=0, metavar="STEPS",
                    help="first cold-start the model on tool traces in the template's call form for STEPS SFT steps "
                         "of 8 (both trainers then start from it and make tool calls); 0 = the base model")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.task.embedded.arithmetic import make_rows

    a.threads = resolve_threads(a.threads, "smollm2-135m-instruct")
    torch.set_num_threads(a.threads)
    rows, _ = make_rows(config.load(Config, overrides=WORD).tasks)
    with tempfile.TemporaryDirectory() as tmp:
        model = model_with_qwen3_template(os.path.join(tmp, "model"))
        if a.cold_start:
            model = cold_start(model, a.cold_start, tmp, a.threads)
            print(f"cold start: {a.cold_start} SFT steps of 8 traces in the template's call form -> {model}",
                  flush=True)
        t_ours, r_ours, c_ours = run_ours(model, a, os.path.join(tmp, "ours"))
        t_trl, r_trl, c_trl = run_trl(model, rows, a, os.path.join(tmp, "trl"))
    med_ours, med_trl = statistics.median(t_ours[1:] or t_ours), statistics.median(t_trl[1:] or t_trl)
    start = f"cold-started ({a.cold_start} SFT steps on tool traces)" if a.cold_start else "from the base model"
    print(f"\nGRPO with a Python tool on SmolLM2-135M-Instruct (Qwen3 template) {start}, {a.steps} steps of "
          f"{a.prompts} prompts x {a.group} samples, <= {a.max_tokens} tokens a turn, <= {a.turns} tool calls, "
          f"{a.threads} threads")
    print(f"{'step':>4} {'ours s':>8} {'trl s':>8} {'ours reward':>12} {'trl reward':>11} {'ours calls':>11} "
          f"{'trl calls':>10}")
    for i in range(a.steps):
        print(f"{i + 1:>4} {t_ours[i]:>8.2f} {t_trl[i]:>8.2f} {r_ours[i]:>12.3f} {r_trl[i]:>11.3f} {c_ours[i]:>11.3f} "
              f"{c_trl[i]:>10.3f}")
    print(f"median s/step: ours {med_ours:.2f}, TRL {med_trl:.2f}: ours is {med_trl / med_ours:.2f}x faster "
          f"(goal >= 2x)")
    print(f"mean reward: ours {statistics.mean(r_ours):.3f}, TRL {statistics.mean(r_trl):.3f}; tool calls per sample: "
          f"ours {statistics.mean(c_ours):.3f}, TRL {statistics.mean(c_trl):.3f} (TRL: tools/call_frequency)")


if __name__ == "__main__":
    main()
