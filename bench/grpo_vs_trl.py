"""Our GRPO trainer against TRL's `GRPOTrainer` (use_vllm=False), side by side in one run.

Both start from the same checkpoint and train on the same prompts, with the same reward (the `math` verifier: 1 for a
correct final answer), group size, prompts per step, completion length, learning rate, loss (`dapo`, clip 0.2 / 0.28,
beta 0, one iteration) and number of steps, with the same torch threads, each minibatch's rows in one forward and
backward pass (TRL: per_device_train_batch_size = the batch, no accumulation; ours: grpo.length_buckets=1, where its
default would cut the bench's small minibatch into four passes a quarter the size of TRL's), and neither recomputing
activations in the backward pass (TRL's configs turn gradient_checkpointing on by default; --trl-checkpointing times
TRL so). Printed: seconds per step for each (median over the steps after the first), their ratio, both reward
curves, and the peak memory of one of our training steps against the model + optimiser + activations estimate.

    .venv/bin/python bench/grpo_vs_trl.py [--steps 20] [--prompts 16] [--group 8] [--seed 0]
    .venv/bin/python bench/grpo_vs_trl.py --model smollm2-135m-instruct --steps 4 --prompts 2 --group 4 \
        --max-tokens 48 --lr 1e-5

--model tiny (the default): the tiny SFT checkpoint on the embedded arithmetic, one thread each.
A real model (smollm2-135m-instruct): word problems (task/embedded/word_problems.py) through its chat template
(TRL applies the same template to conversational prompts), every core for each.

Our update leaves out the rows whose advantage is zero (a group whose samples all scored the same: the same
gradient, fewer passes; grpo.skip_zero_advantage); --keep-zero-rows runs them all, as TRL does.

Not here: any claim about held-out accuracy (the demo measures that); TRL with vLLM.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMMON = dict(eps_low=0.2, eps_high=0.28, temperature=1.0)
WORD = ["tasks.families=[word_add, word_sub, word_mul, word_two]", "tasks.max_digits=1"]
INSTRUCTION = "Put the final answer in \\boxed{}."


def text_of(completion) -> str:
    """What the model wrote: the completion itself, or (conversational prompts) its assistant messages' text."""
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")
    return completion


def math_reward_for(tok):
    """TRL's reward function: the `math` verifier on what the model wrote, told of a completion cut at its token limit
    (no end-of-turn id at its end), as our trainer's reward is."""
    import verifiers

    ends = {i for i in (tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")) if isinstance(i, int) and i >= 0}

    def math_reward(completions, answer, completion_ids=None, **_):
        cut = [bool(ids) and ids[-1] not in ends for ids in completion_ids] if completion_ids else [False] * len(answer)
        return [verifiers.verify("math", text_of(c), a, **({"truncated": True} if t else {})).score
                for c, a, t in zip(completions, answer, cut)]

    return math_reward


def step_clock():
    """(seconds of every TRL step, the callback that records them)."""
    from transformers import TrainerCallback

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    return times, Clock()


def add_trl_checkpointing(ap: argparse.ArgumentParser) -> None:
    """--trl-checkpointing: TRL's own default. Left out, TRL runs the same arithmetic as ours."""
    ap.add_argument("--trl-checkpointing", action="store_true", help="TRL recomputes activations in the backward "
                    "pass (gradient_checkpointing, on by default in TRL's configs); without this flag it is off, as "
                    "ours is (model.gradient_checkpointing=false), so both run the same arithmetic")


def trl_args(a, out: str, **extra):
    """TRL's GRPOConfig with the knobs both trainers share (COMMON, the batch, the loss, the optimiser, activation
    checkpointing: --trl-checkpointing)."""
    from trl import GRPOConfig

    return GRPOConfig(output_dir=out, per_device_train_batch_size=a.prompts * a.group, num_generations=a.group,
                      steps_per_generation=1, gradient_accumulation_steps=1, max_steps=a.steps,
                      max_completion_length=a.max_tokens, learning_rate=a.lr, lr_scheduler_type="constant",
                      warmup_steps=0, loss_type="dapo", beta=0.0, epsilon=COMMON["eps_low"],
                      epsilon_high=COMMON["eps_high"], temperature=COMMON["temperature"], top_p=1.0,
                      scale_rewards="group", num_iterations=1, logging_steps=1, save_strategy="no", report_to="none",
                      use_cpu=True, bf16=False, seed=a.seed, adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0,
                      shuffle_dataset=True, gradient_checkpointing=a.trl_checkpointing, **extra)


def run_trl(ckpt: str, rows: list[dict], a, out: str) -> tuple[list[float], list[float]]:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    times, clock = step_clock()
    tok = AutoTokenizer.from_pretrained(ckpt)
    args = trl_args(a, out)
    if a.model == "tiny":
        ds = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows])
    else:  # conversational prompts: TRL renders them with the model's chat template, as our task does
        ds = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{r['prompt']}\n{INSTRUCTION}"}],
                                 "answer": r["answer"]} for r in rows])
    trainer = GRPOTrainer(model=ckpt, reward_funcs=math_reward_for(tok), args=args, train_dataset=ds,
                          processing_class=tok, callbacks=[clock])
    trainer.train()
    logged = [h for h in trainer.state.log_history if "reward" in h]
    rows = a.prompts * a.group
    a.trl_work = {"rows": [rows] * len(logged),  # TRL's update runs every row of the batch
                  "tokens": [h.get("completions/mean_length", float("nan")) * rows for h in logged]}
    return times, [h["reward"] for h in logged]


def run_ours(ckpt: str, a, out: str) -> tuple[list[float], list[float]]:
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    real = [] if a.model == "tiny" else [*WORD, f"tasks.instruction={INSTRUCTION}", f"num_threads={a.threads}"]
    cfg = config.load(Config, overrides=[*real,
        f"output_dir={out}", f"model.name_or_path={ckpt}", f"seed={a.seed}", f"grpo.steps={a.steps}",
        f"grpo.prompts_per_step={a.prompts}",
        f"grpo.group_size={a.group}", f"generation.max_tokens={a.max_tokens}", f"grpo.lr={a.lr}",
        "grpo.warmup_steps=0", "grpo.loss_type=dapo", "grpo.beta=0", "grpo.num_iterations=1",
        f"grpo.minibatch_size={a.prompts * a.group}", "grpo.length_buckets=1",  # one pass of the batch, as TRL's
        "grpo.filter_mixed=false", "grpo.sampler=uniform",
        f"grpo.eval_every={a.steps + 1}", "eval.size=1", "grpo.checkpoint_every=0", "grpo.verifier_workers=1",
        f"grpo.skip_zero_advantage={not a.keep_zero_rows}", f"cpu_allocator={a.allocator}"])
    t0 = time.perf_counter()
    history, _, _ = train_grpo(cfg, log=lambda *_: None)
    times = [h["time/step"] for h in history]
    a.ours_setup = time.perf_counter() - t0 - sum(times)  # model load, kernel choice, step-0 evaluation, saving
    steady = history[1:] or history
    a.ours_split = {k: statistics.median(h.get(k, 0.0) for h in steady)
                    for k in ("time/rollout", "time/update", "train/zero_advantage_rows")}
    rows = a.prompts * a.group
    a.ours_work = {"rows": [round(h.get("train/samples", 0) * (1 - h.get("train/zero_advantage_rows", 0.0)))
                            for h in history],  # the rows our update ran forward and backward
                   "tokens": [h["completions/mean_length"] * rows for h in history]}
    return times, [h["reward/mean"] for h in history]


def equal_work(ours: dict, trl: dict, tolerance: float = 0.15) -> tuple[bool, str]:
    """Whether both sides did the same work over the steady steps: the same rows through the update every step, and
    generated tokens within `tolerance` of each other (sampling makes lengths differ); and one line saying so."""
    rows_o, rows_t = sum(ours["rows"][1:]), sum(trl["rows"][1:])
    tok_o, tok_t = sum(ours["tokens"][1:]), sum(trl["tokens"][1:])
    same_rows = rows_o == rows_t
    close = tok_t > 0 and abs(tok_o - tok_t) <= tolerance * tok_t
    line = (f"work over steps 2..: rows through the update ours {rows_o}, TRL {rows_t}; tokens generated ours "
            f"{tok_o:.0f}, TRL {tok_t:.0f}")
    if same_rows and close:
        return True, line + ": equal work"
    why = [] if same_rows else [f"our update ran {rows_o} of TRL's {rows_t} rows (rows of zero advantage left out; "
                                "--keep-zero-rows runs them)"]
    why += [] if close else [f"generated tokens differ by more than {tolerance:.0%}"]
    return False, line + ": NOT equal work (" + "; ".join(why) + ")"


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure_memory(a) -> None:
    """Child process: peak RSS growth of building the policy + optimiser and running one training step on
    a batch of B*G sequences of the longest length, against an analytic estimate. Prints one JSON line."""
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.logprobs import token_logprobs
    from reasoning_rl.algos.losses import ppo_clip
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.models.sft import build_sft_checkpoint
    import transformers.models.llama.modeling_llama  # noqa: F401  (imports are not the step's memory)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401

    from bench.machine import peak_rss_mib

    torch.set_num_threads(a.threads)
    cfg = config.load(Config, overrides=[f"model.name_or_path={a.model}"])
    if a.model == "tiny":
        build_sft_checkpoint(cfg)  # cached by the parent; only its path is needed here
    base = rss_mib()
    model, tok = load_policy(cfg, log=lambda *_: None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    n = a.prompts * a.group
    # prompt tokens ("12+34=" + BOS, padded; a word problem in the chat template), completion tokens
    P, T = (8 if a.model == "tiny" else 72), a.max_tokens
    p_ids = torch.randint(4, 60, (n, P))
    c_ids = torch.randint(4, 60, (n, T))
    ones = torch.ones(n, T)
    logp = token_logprobs(model, p_ids, torch.ones(n, P, dtype=torch.long), c_ids, ones)
    out = ppo_clip(logp, logp.detach(), torch.randn(n), ones, eps_low=0.2, eps_high=0.28, agg="token_mean", max_len=T)
    out.loss.backward()
    opt.step()
    peak = peak_rss_mib() - base
    c = model.config
    params = sum(p.numel() for p in model.parameters())
    L, H, I, V, heads = c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.vocab_size, c.num_attention_heads
    S = P + T
    # fp32 bytes: weights + grads + Adam's two moments; activations kept for backward per token per layer:
    # ~12 H (norms, q/k/v/o, residuals) + 4 I (gate, up, act, product) + 2 heads*S (scores, probs);
    # and the logits with their log-softmax (2 V per token).
    act = n * S * (L * (12 * H + 4 * I + 2 * heads * S) + 2 * V) * 4
    estimate = (16 * params + act) / 2**20
    print(json.dumps({"peak_mib": peak, "estimate_mib": estimate, "params": params, "sequences": n, "tokens": S}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step (B)")
    ap.add_argument("--group", type=int, default=8, help="samples per prompt (G)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0, help="sampling/shuffle seed of both trainers (the SFT start is fixed)")
    ap.add_argument("--model", default="tiny", help="tiny, or a named real model (smollm2-135m-instruct)")
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate of both (full fine-tuning)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads of each (0 = 1 for tiny, every core else)")
    ap.add_argument("--keep-zero-rows", action="store_true", help="our update runs every row, as TRL's does, also "
                    "those whose advantage is zero (grpo.skip_zero_advantage=false): the same gradient, more passes")
    ap.add_argument("--allocator", default="reuse", choices=["reuse", "system"], help="our run's cpu_allocator "
                    "(TRL runs first, on glibc's defaults)")
    add_trl_checkpointing(ap)
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    from reasoning_rl.models.device import resolve_threads

    a.threads = resolve_threads(a.threads, a.model)
    if a.memory_child:
        return measure_memory(a)
    import torch

    from reasoning_rl import config
    from reasoning_rl.models import sources as model_sources
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.sft import build_sft_checkpoint
    from reasoning_rl.task.embedded.arithmetic import make_rows

    torch.set_num_threads(a.threads)
    if a.model == "tiny":
        cfg = config.load(Config)
        ckpt = build_sft_checkpoint(cfg)
    else:
        cfg = config.load(Config, overrides=[f"model.name_or_path={a.model}", *WORD])
        ckpt = model_sources.resolve(a.model)
    train_rows, _ = make_rows(cfg.tasks)
    with tempfile.TemporaryDirectory() as tmp:
        # TRL first, on glibc's allocator as its users have it; ours then sets its own (cpu_allocator=reuse)
        t_trl, r_trl = run_trl(ckpt, train_rows, a, os.path.join(tmp, "trl"))
        t_ours, r_ours = run_ours(ckpt, a, os.path.join(tmp, "ours"))
    mem = json.loads(subprocess.run([sys.executable, __file__, "--memory-child", "--prompts", str(a.prompts),
                                     "--group", str(a.group), "--max-tokens", str(a.max_tokens), "--model", a.model,
                                     "--threads", str(a.threads)],
                                    capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    med_ours, med_trl = statistics.median(t_ours[1:]), statistics.median(t_trl[1:])
    print(f"\nGRPO of {a.model}, {a.steps} steps of {a.prompts} prompts x {a.group} samples, <= {a.max_tokens} tokens, "
          f"{a.threads} threads each")
    print(f"{'step':>4} {'ours s':>8} {'trl s':>8} {'ours reward':>12} {'trl reward':>11}")
    for i in range(a.steps):
        print(f"{i + 1:>4} {t_ours[i]:>8.2f} {t_trl[i]:>8.2f} {r_ours[i]:>12.3f} {r_trl[i]:>11.3f}")
    k = max(1, a.steps // 4)
    print(f"first step (warm-up: the first generation, the first backward): ours {t_ours[0]:.2f} s, TRL "
          f"{t_trl[0]:.2f} s; our set-up outside the steps (model load, cpu decode kernels measured, the step-0 "
          f"evaluation, the final save): {getattr(a, 'ours_setup', float('nan')):.2f} s")
    equal, line = equal_work(a.ours_work, a.trl_work)
    print(line)
    print(f"median s/step over the steady state (steps 2..{a.steps}): ours {med_ours:.2f}, TRL {med_trl:.2f}: "
          + (f"ours is {med_trl / med_ours:.2f}x faster at equal work (goal >= 3x)" if equal else
             f"time ratio {med_trl / med_ours:.2f}, not a speed-up: the two did not do the same work"))
    split = a.ours_split
    print(f"our steady step: generation {split['time/rollout']:.2f} s, update {split['time/update']:.2f} s; rows of "
          f"zero advantage left out of the update: {split['train/zero_advantage_rows']:.0%} (median; "
          f"{'kept: --keep-zero-rows' if a.keep_zero_rows else 'grpo.skip_zero_advantage'}); our cpu_allocator "
          f"{a.allocator}, TRL's glibc's defaults; TRL's activation checkpointing "
          f"{'on (its default)' if a.trl_checkpointing else 'off, as ours'}")
    print(f"mean reward over the last {k} steps: ours {statistics.mean(r_ours[-k:]):.3f}, "
          f"TRL {statistics.mean(r_trl[-k:]):.3f} (first {k}: ours {statistics.mean(r_ours[:k]):.3f}, "
          f"TRL {statistics.mean(r_trl[:k]):.3f})")
    print(f"peak memory of one training step ({mem['sequences']} sequences x {mem['tokens']} tokens, "
          f"{mem['params']:,} parameters): {mem['peak_mib']:.1f} MiB vs estimate {mem['estimate_mib']:.1f} MiB "
          f"(ratio {mem['peak_mib'] / mem['estimate_mib']:.2f}, goal <= 2)")


if __name__ == "__main__":
    main()
