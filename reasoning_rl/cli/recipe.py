"""`reasoning-rl recipe`: SFT on a data set's gold solutions, then GRPO from it (and any further stages), each stage a
run folder of its own, scored on the held-out split after it, resumable stage by stage (reasoning_rl/recipes/).

RECIPE_DEFAULTS are its sizes for a 2-core CPU on short word problems (about 35 minutes with the real model; the
measurement is in docs/results.md): applied over the defaults and a --config file, under --set. `--budget long`
multiplies every stage's steps by 4. Where the command does not set generation.max_tokens, the completions may run
to 1.5 times the 95th percentile of the gold solutions' lengths (at least 128 tokens), said in one line; an episode
with the calculator, its turns and the calculator's answers together, to the same (max_episode_tokens).
"""
from __future__ import annotations

import math
import sys
import time

from .args import add_config_args, add_task_args, cmd, load_config, set_threads
from ..errors import UserError

# the calculator at hand: each gold calculation a call <<expr>> (GSM8K's annotations, an equation line), in SFT, RL
# and every evaluation (final/ carries it); every RL section runs its episodes
TOOL = tuple(f"{s}.{k}" for s in ("grpo", "ppo", "distill")
             for k in ("environment=calculator", "max_turns=8", "max_tool_calls=8"))
RECIPE_DEFAULTS: tuple[str, ...] = (
    "tasks.instruction=Write each calculation as <<expression>>; a calculator answers it. Put the final answer in "
    "\\boxed{}.", "tasks.target_format=calculator", *TOOL,
    "recipe.sft_lora_r=16", "sft.steps=60", "sft.batch_size=16", "sft.lr=1e-3", "sft.warmup_steps=5",
    "sft.checkpoint_every=20", "sft.log_every=10",
    "model.lora.r=16", "model.lora.alpha=32", "generation.temperature=0.7",
    "grpo.steps=15", "grpo.prompts_per_step=4", "grpo.group_size=8", "grpo.minibatch_size=32",
    "grpo.max_refill_rounds=0", "grpo.warmup_steps=0", "grpo.lr=5e-5", "grpo.sampler=easy_first",
    "grpo.checkpoint_every=10", "grpo.train_prompts=256",
    "ppo.steps=30", "ppo.prompts_per_step=16", "ppo.minibatch_size=32", "ppo.lr=3e-4", "ppo.warmup_steps=0",
    "ppo.checkpoint_every=10", "ppo.train_prompts=256",
    "distill.steps=30", "distill.prompts_per_step=8", "distill.minibatch_size=32", "distill.lr=3e-4",
    "distill.warmup_steps=0", "distill.checkpoint_every=10", "distill.train_prompts=256",
    "dpo.lr=5e-6", "dpo.batch_size=16",
)
BUDGETS = {"short": 1.0, "long": 4.0}


def add_recipe_command(sub) -> None:
    p = cmd(sub, "recipe", "SFT on the data's gold solutions, then GRPO from it (recipe.stages for more), each stage "
                           "a run folder scored on the held-out split; resumable; the last model in DIR/final",
            "reasoning-rl recipe --dataset train.jsonl --preset gsm8k --model smollm2-135m-instruct "
            "--set output_dir=runs/r1")
    add_config_args(p)
    add_task_args(p, verifier=True)
    p.add_argument("--model", metavar="NAME", help="the model to start from (same as --set model.name_or_path=...)")
    p.add_argument("--budget", choices=sorted(BUDGETS), default="short",
                   help="short: sized for about 35 minutes on 2 cores on short word problems; long: every stage's "
                        "steps x 4 (recipe.scale)")
    p.add_argument("--resume", action="store_true", help="continue the recipe in output_dir: done stages are kept, "
                                                         "the one cut short goes on from what it kept")
    p.set_defaults(func=cmd_recipe)


def sized_max_tokens(cfg, log) -> int:
    """1.5 x the 95th percentile of the gold solutions' token lengths, rounded up to 32, at least 128."""
    from ..models.load import load_tokenizer
    from ..task.task import Task

    task = Task.from_config(cfg.tasks)
    tok = load_tokenizer(cfg)
    lengths = sorted(len(tok(r["completion"], add_special_tokens=False)["input_ids"]) for r in task.gold_rows()[:2000])
    p95 = lengths[min(len(lengths) - 1, int(0.95 * len(lengths)))]
    n = max(128, 32 * math.ceil(1.5 * p95 / 32))
    log(f"recipe: generation.max_tokens={n} (1.5 x the 95th percentile of the gold solutions' lengths, {p95} tokens; "
        "--set generation.max_tokens to choose)")
    return n


def cmd_recipe(args) -> int:
    import dataclasses

    from .. import config
    from ..recipes.run import run_recipe

    def log(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    given = config.given_keys(args.config, args.overrides)
    if args.model:
        args.overrides = [f"model.name_or_path={args.model}", *args.overrides]
    args.overrides = [*RECIPE_DEFAULTS, f"recipe.scale={BUDGETS[args.budget]}", *args.overrides]
    cfg = load_config(args, log=log)
    if not cfg.tasks.source:
        raise UserError("recipe: give --dataset FILE (a JSONL of questions and gold solutions, e.g. --preset gsm8k); "
                        "the embedded tiny tasks have no gold solutions to fine-tune on")
    if not cfg.output_dir:
        raise UserError("recipe: name its folder with --set output_dir=DIR (each stage writes a run folder in it; "
                        "--resume continues it)")
    if "generation.max_tokens" not in given:
        cfg = dataclasses.replace(cfg, generation=dataclasses.replace(cfg.generation,
                                                                      max_tokens=sized_max_tokens(cfg, log)))
    # an episode, every turn and the calculator's answers together, within the completion's length (a model that
    # wanders, the start model most, costs no more than a plain completion would)
    cfg = dataclasses.replace(cfg, **{s: dataclasses.replace(getattr(cfg, s),
                                                             max_episode_tokens=cfg.generation.max_tokens)
                                      for s in ("grpo", "ppo", "distill") if f"{s}.max_episode_tokens" not in given})
    set_threads(cfg)
    t0 = time.time()
    run_recipe(cfg, cfg.output_dir, resume=args.resume, log=log)
    log(f"recipe: {time.time() - t0:.0f} s in this invocation; summary in {cfg.output_dir}/summary.md")
    return 0
